"""The systemd notify protocol (sd_notify(3)), spoken directly over ``$NOTIFY_SOCKET``.

READY=1 once the database is open, workers are loaded and the listener is bound; STATUS=
lines with queue and backlog counts; RELOADING=1 + MONOTONIC_USEC around a reload;
STOPPING=1 on shutdown; WATCHDOG=1 at half of ``$WATCHDOG_USEC``, sent from the event loop
so that a wedged loop stops the pings and systemd restarts the service.
Outside systemd (no ``$NOTIFY_SOCKET``) every call does nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)


class Notifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        addr = env.get("NOTIFY_SOCKET", "")
        if addr.startswith("@"):  # abstract namespace
            addr = "\0" + addr[1:]
        self.address = addr or None
        self.watchdog_s: float | None = None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_s = int(usec) / 1_000_000 / 2
        self._sock: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *lines: str) -> bool:
        if self.address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sock.setblocking(False)
            self._sock.sendto("\n".join(lines).encode(), self.address)
            return True
        except OSError as e:
            log.warning("cannot notify systemd at %s: %s", self.address, e)
            return False

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> None:
        self.send(f"STATUS={status}")

    def reloading(self) -> None:
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    async def watchdog(self) -> None:
        """Ping at half the watchdog interval for as long as the event loop runs them."""
        if self.watchdog_s is None or self.address is None:
            return
        while True:
            self.send("WATCHDOG=1")
            await asyncio.sleep(self.watchdog_s)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
