"""Every error ocd raises on purpose.

    OcdError
    ├── ConfigError            the config (or a wrangler file it names) is wrong; has every Problem
    ├── WorkerLoadError        a worker module is missing, fails to import, or has bad handlers
    ├── WorkerLoadErrors       every WorkerLoadError of one config
    ├── StartupError           the daemon could not start: port taken, database unwritable, ...
    ├── StoreError             the queue database failed; ``where`` (path or DSN without its
    │   │                      password) and ``operation`` say which and doing what
    │   ├── StoreUnavailable   retryable: the database cannot be reached now (connection lost,
    │   │                      server restarting, I/O error); try again later
    │   ├── StoreFull          the disk or the database's quota is full
    │   ├── StoreConflict      a uniqueness rule was broken (a queue name, a consumer); nothing
    │   │                      was written
    │   ├── StoreLockedError   another ocd owns the data directory
    │   ├── StoreLoopDied      one of the store's own loops ended while ocd served
    │   └── StoreCorrupt       not an ocd database, a newer schema, or a damaged file
    │       ├── SchemaError    (the older name, kept for callers)
    │       └── StoreBehind    the database holds less than ocd committed to it (its
    │                          high-water mark): a lost or damaged WAL, a replaced file
    ├── QueueNotFound          a queue name that does not exist (code 10104); ``queue``
    ├── QueueExists            the account has a queue of that name; ``account``, ``name``
    ├── QueueInUse             the config file names the queue, so it cannot be deleted or
    │   │                      renamed; ``queue``, ``named_by``, ``action``
    │   └── ConsumerInConfig   the queue's consumer is a worker of the config file: it is
    │                          changed or removed there, not over the API; ``worker``
    ├── HandlerThrew           a handler in another runtime (workerd) threw; ``worker``,
    │                          ``handler``, and its error already logged with its stack
    ├── ConsumerExists         the queue already has a consumer (one at a time); ``queue``
    ├── ConsumerNotFound       no consumer of that id on the queue; ``queue``, ``consumer_id``
    ├── QueueTypeError         standard and FIFO queues mixed where they cannot be; ``queue``
    │   ├── QueueTypeChange         a rename across the ``.fifo`` line; ``new_name``
    │   ├── DeadLetterTypeMismatch  a dead-letter queue of the other type; ``dead_letter_queue``
    │   └── FifoSettingOnStandard   a FIFO-only setting on a standard queue; ``setting``
    ├── QueueSendError         a send broke a Cloudflare Queues limit; str() is "<cause> (<code>)"
    │   └── QueueSendArgumentError  wrong FIFO keys for the queue (also a TypeError)
    ├── KvRefused              a KV call broke a Workers KV limit (a key too long, a value or
    │                          metadata too large, an expiry too soon); ``status`` is the
    │                          HTTP status Cloudflare answers, str() its text
    ├── D1Error                a D1 query failed; str() is D1's text without its "D1_ERROR: "
    └── R2Refused              an R2 call R2 would refuse (no such key or upload, a failed
                               precondition, a bad digest or range); ``status``, ``v4code``

Worker-facing TypeErrors (wrong body for a content type, unknown content type) are plain
``TypeError`` as in workerd, not part of this tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class OcdError(Exception):
    """Base of every deliberate ocd error."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a config file: where, and what was expected."""

    file: Path
    key_path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.key_path}" if self.key_path else f"{self.file}"
        return f"{where}: {self.message}"


class StartupError(OcdError):
    """The daemon could not start: port taken, database unwritable, ..."""


class ConfigError(OcdError):
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class WorkerLoadError(OcdError):
    """A worker could not be loaded; ``detail`` keeps the original traceback text."""

    def __init__(
        self, worker: str, file: Path, key_path: str, message: str, detail: str = ""
    ) -> None:
        self.worker = worker
        self.problem = Problem(file, key_path, message)
        self.detail = detail
        super().__init__(str(self.problem) + (f"\n{detail}" if detail else ""))


class WorkerLoadErrors(OcdError):
    def __init__(self, errors: list[WorkerLoadError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


class StoreError(OcdError):
    """The queue database failed. Each backend turns its driver's errors into these at one
    boundary; nothing above ``ocd.store`` sees a driver exception."""

    def __init__(self, message: str, where: str = "", operation: str = "") -> None:
        self.where = where
        self.operation = operation
        super().__init__(message)


class StoreUnavailable(StoreError):
    """Retryable: the database cannot be reached or written now."""

    retryable = True


class StoreFull(StoreError):
    """The disk or the database's quota is full."""


class StoreConflict(StoreError):
    """A uniqueness rule was broken; nothing was written. ``what`` names the rule."""

    def __init__(self, message: str, what: str = "", where: str = "", operation: str = "") -> None:
        self.what = what
        super().__init__(message, where, operation)


class StoreLockedError(StoreError):
    pass


class StoreCorrupt(StoreError):
    """Not an ocd database, a schema newer than this ocd, or a damaged file."""


SchemaError = StoreCorrupt


class StoreLoopDied(StoreError):
    """One of the store's own loops (writer, checkpoints, heartbeat, change feed) ended
    while ocd was serving; the daemon stops (exit 1) rather than run without it."""


class StoreBehind(StoreCorrupt):
    """The database is older than what ocd durably committed to it; ``missing`` commits
    are gone (None when the file is another database altogether)."""

    def __init__(
        self, message: str, missing: int | None = None, where: str = "", operation: str = ""
    ) -> None:
        self.missing = missing
        super().__init__(message, where, operation)


class QueueNotFound(OcdError):
    code = 10104  # ocd.limits.QUEUE_NAME_NOT_FOUND (errors imports nothing of ocd)

    def __init__(self, queue: str) -> None:
        self.queue = queue
        super().__init__(f"Queue not found: {queue} ({self.code})")


class QueueExists(OcdError):
    """A create or rename to a name the account already has; nothing was written."""

    def __init__(self, account: str, name: str) -> None:
        self.account = account
        self.name = name
        super().__init__(f"A queue named {name} already exists")


class QueueInUse(OcdError):
    """The config file names the queue (``named_by``: "worker app", "[[queues]]"), so it
    cannot be ``action`` ("deleted", "renamed") until it is removed there."""

    def __init__(self, queue: str, named_by: list[str], action: str = "deleted") -> None:
        self.queue = queue
        self.named_by = list(named_by)
        self.action = action
        super().__init__(self._message())

    def _message(self) -> str:
        return (
            f"queue {self.queue} cannot be {self.action}: ocd's config file names it "
            f"({', '.join(self.named_by)}); remove it there and reload first"
        )


class ConsumerInConfig(QueueInUse):
    """The queue's consumer is ``worker`` in the config file, not an API consumer."""

    def __init__(self, queue: str, worker: str, action: str = "removed") -> None:
        self.worker = worker
        super().__init__(queue, [f"worker {worker}"], action)

    def _message(self) -> str:
        return (
            f"the consumer of {self.queue} is worker {self.worker} in ocd's config file; "
            "remove it there"
        )


class HandlerThrew(OcdError):
    """A worker's handler ran elsewhere (workerd) and threw; its error, with its stack, was
    logged as it was reported (``worker_error``). str() is one line: the error and where."""

    def __init__(self, worker: str, handler: str, summary: str) -> None:
        super().__init__(summary)
        self.worker = worker
        self.handler = handler
        self.summary = summary


class ConsumerExists(OcdError):
    def __init__(self, queue: str) -> None:
        self.queue = queue
        super().__init__(
            f"queue {queue} already has a consumer; a queue has one consumer at a time"
        )


class MoveTaskRunning(OcdError):
    """A redrive of a queue that has one running (one active redrive per source queue)."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        super().__init__(
            f"a redrive of queue {queue} is running; cancel it or wait for it to finish"
        )


class ConsumerNotFound(OcdError):
    def __init__(self, queue: str, consumer_id: str | None = None) -> None:
        self.queue = queue
        self.consumer_id = consumer_id
        super().__init__("Consumer not found")


class QueueTypeError(OcdError):
    """Standard and FIFO queues (a name ending in ``.fifo``) mixed where they cannot be;
    nothing was written."""

    def __init__(self, queue: str, message: str) -> None:
        self.queue = queue
        super().__init__(message)


class QueueTypeChange(QueueTypeError):
    """A rename would turn a standard queue into a FIFO one, or a FIFO one into a standard
    one: the two keep their messages differently, so a queue keeps its type for life."""

    def __init__(self, queue: str, new_name: str) -> None:
        self.new_name = new_name
        kind, other = ("FIFO", "standard") if queue.endswith(".fifo") else ("standard", "FIFO")
        super().__init__(
            queue,
            f"queue {queue} cannot be renamed to {new_name}: a {kind} queue cannot become a "
            f"{other} one (FIFO queues are the names ending in .fifo); create a new queue "
            "instead",
        )


class DeadLetterTypeMismatch(QueueTypeError):
    """A FIFO queue's dead-letter queue must be FIFO, a standard queue's standard."""

    def __init__(self, queue: str, dead_letter_queue: str) -> None:
        self.dead_letter_queue = dead_letter_queue
        fifo = queue.endswith(".fifo")
        kind, other = ("FIFO", "standard") if fifo else ("standard", "FIFO")
        super().__init__(
            queue,
            f"the dead letter queue of the {kind} queue {queue} must be a {kind} queue "
            f"(FIFO queues are the names ending in .fifo), got the {other} queue "
            f"{dead_letter_queue}",
        )


class FifoSettingOnStandard(QueueTypeError):
    """``content_based_deduplication`` or ``deduplication_scope`` set, to other than its
    default, on a standard queue."""

    def __init__(self, queue: str, setting: str) -> None:
        self.setting = setting
        super().__init__(
            queue,
            f"{setting} is only valid on FIFO queues (names ending in .fifo); {queue} is a "
            "standard queue",
        )


class QueueSendError(OcdError):
    """A send or sendBatch broke a limit; nothing from it was stored."""

    def __init__(self, cause: str, code: int) -> None:
        self.cause = cause
        self.code = code
        super().__init__(f"{cause} ({code})")


class QueueSendArgumentError(QueueSendError, TypeError):
    """A send named the wrong FIFO keys for its queue (a group id on a standard queue, none
    on a FIFO one, a malformed id, a delay on a FIFO queue): a ``TypeError`` to worker code,
    a 400 on the REST API."""


class KvRefused(OcdError):
    """A KV call broke a Workers KV limit; nothing was written. ``status`` is Cloudflare's
    HTTP status for it (400, 413, 414), the message its text."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


class D1Error(OcdError):
    """A D1 batch failed and changed nothing: SQLite's message and result code as D1 words
    them ("no such table: x: SQLITE_ERROR"); the binding prefixes "D1_ERROR: "."""


class R2Refused(OcdError):
    """An R2 call refused as R2 refuses it: ``status`` (HTTP), ``v4code`` (Cloudflare's
    API code, which workerd puts in the error it throws) and R2's text; ``current``: the
    object's metadata where R2 sends it along (a failed precondition of a get)."""

    def __init__(self, status: int, v4code: int, message: str, current: object = None) -> None:
        self.status = status
        self.v4code = v4code
        self.message = message
        self.current = current
        super().__init__(message)
