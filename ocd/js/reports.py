"""What a JS worker's ``fetch``, ``queue`` and ``scheduled`` throw, as the worker's entry
wrapper (``capnp.entry_module``) reports it: ``POST /error`` on the producer socket, through
an external service that injects the worker's name and the start's secret.

Each report is one log record tagged with the worker (event ``worker_error``: the error's
name, message and stack, told in the user's source files), and is kept for the caller that
waits on the handler's outcome: ``FetcherQueueResult`` and the ``scheduled`` result carry no
error text, and the wrapper's report arrives before the handler's outcome does (it awaits
the report before rethrowing).
"""

from __future__ import annotations

import datetime as dt
import hmac
import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ocd.js.capnp import ENTRY_MODULE
from ocd.js.sourcemap import SourceMap, map_stack
from ocd.js.wire import Answer, Asked, Handler

log = logging.getLogger(__name__)

KEPT = 1000  # reports nobody took (a timed-out handler that threw later) are dropped oldest first
MAX_REPORT_BYTES = 256 * 1024
_HIDDEN = frozenset((ENTRY_MODULE,))


@dataclass(frozen=True, slots=True)
class JsError:
    """One error thrown by a worker's handler, its stack in the user's files."""

    worker: str
    handler: str  # fetch, queue or scheduled
    name: str
    message: str
    stack: str

    @property
    def where(self) -> str | None:
        """The first frame of the stack, without "at "."""
        for line in self.stack.splitlines()[1:]:
            line = line.strip()
            if line.startswith("at "):
                return line[3:]
        return None

    def summary(self) -> str:
        """One line for a batch or cron line: ``TypeError: message (at f (src/a.ts:3:9))``."""
        where = self.where
        return f"{self.name}: {self.message}" + (f" (at {where})" if where else "")


class ErrorReports:
    """The ``/error`` endpoint of one workerd start. ``maps``: worker -> its bundle's source
    map, if esbuild wrote one."""

    def __init__(self, secret: str, maps: Mapping[str, SourceMap | None]) -> None:
        self.secret = f"Bearer {secret}".encode()
        self.maps = dict(maps)
        self._kept: OrderedDict[tuple[str, str], JsError] = OrderedDict()

    def routes(self) -> dict[tuple[str, str], Handler]:
        """The route of the producer socket the generated entry module reports on."""
        return {("POST", "/error"): self.receive}

    async def receive(self, asked: Asked) -> Answer:
        given = asked.headers.get("authorization", "").encode()
        worker = asked.headers.get("x-ocd-worker", "")
        if not hmac.compare_digest(given, self.secret) or worker not in self.maps:
            return Answer(403, b"not allowed", "text/plain")
        try:
            raw = json.loads(asked.body[:MAX_REPORT_BYTES])
            handler = str(raw["handler"])
            name, message = str(raw.get("name", "Error")), str(raw.get("message", ""))
            stack = str(raw.get("stack") or "")
        except (ValueError, KeyError, TypeError):
            return Answer(400, b"not a report", "text/plain")
        source_map = self.maps[worker]
        if stack:
            stack = map_stack(stack, {"index.js": source_map} if source_map else {}, _HIDDEN)
        error = JsError(worker, handler, name, message, stack or f"{name}: {message}")
        self._log(error, raw)
        for key in _keys(handler, raw):
            self._kept[(worker, key)] = error
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return Answer(204, content_type=None)

    def _log(self, error: JsError, raw: dict[str, object]) -> None:
        extra: dict[str, object] = {
            "event": "worker_error",
            "worker": error.worker,
            "handler": error.handler,
            "error_name": error.name,
            "error_message": error.message,
            "stack": error.stack,
        }
        for key in ("queue", "cron", "method", "url"):
            if isinstance(raw.get(key), str):
                extra[key] = raw[key]
        log.error("worker %s: %s() threw %s", error.worker, error.handler, error.stack, extra=extra)

    def take_batch(self, worker: str, ids: Iterable[str]) -> JsError | None:
        """The error ``queue()`` threw on a batch holding any of ``ids``."""
        found: JsError | None = None
        for i in ids:
            found = self._kept.pop((worker, f"queue:{i}"), None) or found
        return found

    def take_scheduled(self, worker: str, cron: str, scheduled_ms: int) -> JsError | None:
        return self._kept.pop((worker, f"scheduled:{cron}:{scheduled_ms}"), None)


def _keys(handler: str, raw: dict[str, object]) -> list[str]:
    ids = raw.get("ids")
    if handler == "queue" and isinstance(ids, list):
        return [f"queue:{i}" for i in ids]
    if handler == "scheduled":
        return [f"scheduled:{raw.get('cron')}:{_ms(raw.get('scheduledTime'))}"]
    return []


def _ms(value: object) -> object:
    # a Date reaches JSON as an ISO string; ocd keys runs by epoch milliseconds
    if isinstance(value, str):
        try:
            return int(dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return value
    return value


def load_maps(out_dir: Path, workers: Iterable[str], root: Path) -> dict[str, SourceMap | None]:
    """Each worker's source map from its bundle directory (None with ``no_bundle``)."""
    return {w: SourceMap.load(out_dir / w / "index.js.map", root) for w in workers}
