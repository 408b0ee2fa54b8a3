"""The one read-only view of the running daemon that the HTTP surfaces read, live on every
request (a reload swaps the config and the workers; the lifecycle moves the state): the ops
endpoints read it as it is, and the dashboard extends it with the operations its actions
call (``ocd.http.ui.source.UiSource``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ocd.clock import Clock
from ocd.config import Config
from ocd.dispatch import Dispatcher
from ocd.loader import LoadedWorker
from ocd.metrics import Metrics
from ocd.scheduler import Scheduler
from ocd.store import CatalogueReads, Lifecycle, Messages


class ViewStore(Lifecycle, CatalogueReads, Messages, Protocol):
    """What the ops endpoints read of the store: its health, the queues and their counts
    (``ocd status``, ``Metrics.render``)."""


class DaemonView(Protocol):
    @property
    def config(self) -> Config: ...
    @property
    def workers(self) -> Sequence[LoadedWorker]: ...
    @property
    def dispatchers(self) -> Mapping[tuple[str, str], Dispatcher]: ...
    @property
    def state(self) -> str: ...
    @property
    def store(self) -> ViewStore: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def last_reload(self) -> dict[str, Any] | None: ...
    @property
    def workerd_state(self) -> str | None:
        """ "up" or "down" when JavaScript workers run in workerd; None without any."""
