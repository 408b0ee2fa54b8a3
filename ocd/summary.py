"""What the daemon says of itself: the line it logs once it serves (``started``) and the
status line systemd shows while it runs (``status_line``, sent again every
``STATUS_EVERY_S`` by ``report_status``). Both are read from the daemon's parts; the daemon
logs and notifies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Any, Protocol

from ocd.config import Config
from ocd.notify import Notifier
from ocd.store import CatalogueReads, Lifecycle

STATUS_EVERY_S = 10.0

# Names a startup line lists before it counts the rest: thousands of queues make one line
# of hundreds of kilobytes that no one reads.
LISTED = 10


class SummaryStore(Lifecycle, CatalogueReads, Protocol):
    """What the summaries read of the store: where it is, its queues and their backlogs."""


@dataclass(frozen=True)
class Summary:
    line: str  # for people
    fields: dict[str, Any]  # for machines: the structured fields of the "started" event


def started(config: Config, store: SummaryStore, port: int) -> Summary:
    """The startup line: where ocd listens, its workers, queues, consumers and database."""
    consumers = [f"{c.queue}->{w.name}" for w in config.workers for c in w.consumers]
    workers = [w.name + (" (workerd)" if w.js else "") for w in config.workers]
    queues = [q.name for q in store.queues()]
    host = config.server.host
    shown = f"[{host}]" if ":" in host else host
    line = (
        f"ocd serving on http://{shown}:{port}; workers: {_some(workers)}; "
        f"queues: {_some(queues)}; consumers: {_some(consumers)}; database: {store.where}"
    )
    fields = {
        "listen": f"{shown}:{port}",
        "workers": len(workers),
        "queues": len(queues),
        "consumers": len(consumers),
    }
    return Summary(line, fields)


def status_line(workers: Sized, store: SummaryStore) -> str:
    """Workers, queues and the messages in their backlogs, as this node last knew them."""
    queues = store.queues()
    counts = [store.backlog_count(q) for q in queues]
    return f"{len(workers)} worker(s), {len(queues)} queue(s), {sum(counts)} message(s) in backlog"


async def report_status(
    notifier: Notifier, line: Callable[[], str], every_s: float = STATUS_EVERY_S
) -> None:
    """Send ``line()`` to systemd every ``every_s``, until cancelled; without systemd to
    tell, nothing (the line counts every queue's backlog)."""
    if not notifier.enabled:
        return
    while True:
        await asyncio.sleep(every_s)
        notifier.status(line())


def _some(names: list[str]) -> str:
    """``names`` for a log line: all of a few, else the first few and how many more."""
    if not names:
        return "none"
    if len(names) <= LISTED:
        return ", ".join(names)
    return f"{', '.join(names[:LISTED])} and {len(names) - LISTED:,} more"
