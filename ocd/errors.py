"""Every error ocd raises on purpose.

    OcdError
    ├── ConfigError            the config (or a wrangler file it names) is wrong; has every Problem
    ├── WorkerLoadError        a worker module is missing, fails to import, or has bad handlers
    ├── WorkerLoadErrors       every WorkerLoadError of one config
    ├── StoreError             the queue database failed (disk full, I/O error, corrupt file)
    │   ├── StoreLockedError   another ocd owns the data directory
    │   └── SchemaError        the database was written by a newer ocd, or is not an ocd database
    ├── QueueNotFound          a queue name that does not exist (code 10104)
    └── QueueSendError         a send broke a Cloudflare Queues limit; str() is "<cause> (<code>)"

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
    pass


class StoreLockedError(StoreError):
    pass


class SchemaError(StoreError):
    pass


class QueueNotFound(OcdError):
    code = 10104

    def __init__(self, queue: str) -> None:
        self.queue = queue
        super().__init__(f"Queue not found: {queue} ({self.code})")


class QueueSendError(OcdError):
    """A send or sendBatch broke a limit; nothing from it was stored."""

    def __init__(self, cause: str, code: int) -> None:
        self.cause = cause
        self.code = code
        super().__init__(f"{cause} ({code})")
