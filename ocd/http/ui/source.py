"""What the dashboard reads from the running daemon, and the operations its actions call:
the daemon's read-only view (``ocd.http.view``) and three more."""

from __future__ import annotations

from typing import Protocol

from ocd.admin import Admin
from ocd.http.view import DaemonView
from ocd.producer import Producer


class UiSource(DaemonView, Protocol):
    @property
    def admin(self) -> Admin: ...
    @property
    def producer(self) -> Producer: ...

    async def reload(self) -> bool: ...
