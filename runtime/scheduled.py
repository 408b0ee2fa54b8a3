"""What ``scheduled(controller, env, ctx)`` receives for a cron trigger."""

from __future__ import annotations


class ScheduledController:
    """``controller.cron`` (the schedule that fired, as written in the config),
    ``controller.scheduledTime`` (epoch milliseconds of the minute it was due) and
    ``controller.noRetry()``: ocd does not retry a failed run, so it only records the wish."""

    def __init__(self, cron: str, scheduled_time_ms: int) -> None:
        self.cron = cron
        self.scheduledTime = scheduled_time_ms
        self.scheduled_time = scheduled_time_ms
        self.type = "scheduled"
        self.retry = True

    def noRetry(self) -> None:
        self.retry = False

    no_retry = noRetry

    def __repr__(self) -> str:
        return f"<ScheduledController {self.cron!r} at {self.scheduledTime}>"
