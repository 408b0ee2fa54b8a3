"""What the dashboard reads from the running daemon (live on every request: a reload swaps
the config and the workers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ocd.admin import Admin
from ocd.clock import Clock
from ocd.config import Config
from ocd.dispatch import Dispatcher
from ocd.loader import LoadedWorker
from ocd.metrics import Metrics
from ocd.producer import Producer
from ocd.store import Store


class UiSource(Protocol):
    @property
    def config(self) -> Config: ...
    @property
    def workers(self) -> Sequence[LoadedWorker]: ...
    @property
    def dispatchers(self) -> Mapping[tuple[str, str], Dispatcher]: ...
    @property
    def state(self) -> str: ...
    @property
    def store(self) -> Store: ...
    @property
    def admin(self) -> Admin: ...
    @property
    def producer(self) -> Producer: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def last_reload(self) -> dict[str, Any] | None: ...

    async def reload(self) -> bool: ...
