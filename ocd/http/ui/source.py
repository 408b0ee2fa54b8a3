"""What the dashboard reads from the running daemon, and the operations its actions call:
the daemon's read-only view (``ocd.http.view``) and three more."""

from __future__ import annotations

from typing import Protocol

from ocd.admin import Admin
from ocd.http.view import DaemonView, ViewStore
from ocd.producer import Producer
from ocd.store import Browsing, Coordination


class UiStore(ViewStore, Browsing, Coordination, Protocol):
    """What the dashboard reads of the store besides the daemon's view: browsing and
    searching messages, and the secret that signs its sessions (writes go through admin
    and the producer)."""


class UiSource(DaemonView, Protocol):
    @property
    def store(self) -> UiStore: ...
    @property
    def admin(self) -> Admin: ...
    @property
    def producer(self) -> Producer: ...

    async def reload(self) -> bool: ...
