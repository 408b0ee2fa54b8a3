"""The workerd process: started with ``--control-fd``, ready once every socket it was given
reports ``listen``, its stdout and stderr turned into ocd log lines tagged with the worker
that wrote them."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ocd.files import CHILD_UMASK
from ocd.js.capnp import LOG_TAG

log = logging.getLogger("ocd.js.workerd")

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0
_TAGGED = re.compile(re.escape(LOG_TAG).replace(r"\{name\}", r"([A-Za-z0-9_-]+)") + r" ?")
_SERVICE = re.compile(r"service w_([A-Za-z0-9_-]+): ")
# What workerd is given of ocd's environment: where things are, the locale and time zone, and
# the CA roots for its outbound TLS. ocd's own environment holds secrets (SQS keys'
# ``secret_env``, database DSNs) that no Worker needs; a Worker's vars reach it through the
# generated config, never through the environment.
PASSED_ENV = ("PATH", "HOME", "TMPDIR", "TZ", "LANG", "LANGUAGE", "SSL_CERT_FILE", "SSL_CERT_DIR")
# workerd's own source positions and severities ("workerd/server/server.c++:393: error: ",
# "workerd/jsg/value.h:1456: failed: "), its wrapping of a JS error ("remote.jsg.TypeError"),
# none of which is the Worker's doing
_WORKERD_WHERE = re.compile(r"(?:[\w./+-]+:\d+: (?:error|warning|info|debug|failed): )+")
_UNCAUGHT = re.compile(r"^Uncaught exception: (?:[\w./+-]+:\d+: failed: )?")
_JSG = re.compile(r"\b(?:remote\.)?jsg\.(?=[A-Z]\w*(?:Error|Exception)\b)")


def attribute(line: str, sole_worker: str | None) -> tuple[str, str]:
    """The worker a line of workerd's output belongs to, and the line without workerd's
    prefixes. An uncaught exception names no worker; with one JS worker it can only be
    that one's."""
    worker = "workerd"
    m = _TAGGED.search(line)
    if m:
        worker = m.group(1)
        line = line[: m.start()] + line[m.end() :]
    else:
        s = _SERVICE.search(line)
        if s:
            worker = s.group(1)
    line = _WORKERD_WHERE.sub("", line, count=1) if _WORKERD_WHERE.match(line) else line
    uncaught = _UNCAUGHT.match(line)
    if uncaught:
        line = _JSG.sub("", line[uncaught.end() :])
        if worker == "workerd" and sole_worker is not None:
            worker = sole_worker
    for prefix in ("stdout: ", "stderr: "):
        line = line.removeprefix(prefix)
    return worker, line


def environ(parent: Mapping[str, str]) -> dict[str, str]:
    """The environment workerd runs with: ``PASSED_ENV`` and the ``LC_*`` of ``parent``."""
    return {k: v for k, v in parent.items() if k in PASSED_ENV or k.startswith("LC_")}


def _in_child() -> None:
    """In the child: workerd gets SIGKILL when ocd dies, even by kill -9 (Linux's
    PR_SET_PDEATHSIG), so that no orphan keeps serving old code beside a new ocd; and its
    unix sockets are as private as their directory (uvloop has no ``umask=``)."""
    os.umask(CHILD_UMASK)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class WorkerdFailed(Exception):
    """workerd exited before it was ready (a config workerd refused, a syntax error at
    load): its own words."""


class Workerd:
    """One workerd process serving ``config`` (text capnp, constant ``config``)."""

    def __init__(
        self, binary: Path, config: Path, sockets: list[str], workers: Sequence[str] = ()
    ) -> None:
        self.binary = binary
        self.sole_worker = workers[0] if len(workers) == 1 else None
        self.config = config
        self.sockets = sockets
        self.proc: asyncio.subprocess.Process | None = None
        self._readers: list[asyncio.Task[None]] = []
        self._stderr_tail: list[str] = []
        self.on_exit: Callable[[int], None] | None = None
        self._stopping = False
        self._watcher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start workerd and wait until every socket listens; ``WorkerdFailed`` with its
        stderr if it exits before."""
        read_fd, write_fd = os.pipe()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                str(self.binary),
                "serve",
                str(self.config),
                "config",
                "--experimental",
                f"--control-fd={write_fd}",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(write_fd,),
                preexec_fn=_in_child,
                env=environ(os.environ),
            )
        finally:
            os.close(write_fd)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            asyncio.create_task(self._pipe(self.proc.stdout, logging.INFO), name="ocd-workerd-out"),
            asyncio.create_task(
                self._pipe(self.proc.stderr, logging.WARNING), name="ocd-workerd-err"
            ),
        ]
        control = open(read_fd, "rb", buffering=0)  # closed below
        try:
            await asyncio.wait_for(self._listening(control), READY_TIMEOUT_S)
        except (TimeoutError, WorkerdFailed) as e:
            await self.stop()
            tail = "\n".join(self._stderr_tail[-20:])
            if isinstance(e, WorkerdFailed):
                raise WorkerdFailed(tail or str(e)) from None
            raise WorkerdFailed(
                f"workerd did not listen within {READY_TIMEOUT_S:.0f} s"
                + (f":\n{tail}" if tail else "")
            ) from None
        finally:
            control.close()
        self._watcher = asyncio.create_task(self._watch(), name="ocd-workerd-watch")

    async def _listening(self, control: object) -> None:
        loop = asyncio.get_running_loop()
        waiting = set(self.sockets)
        buf = b""
        assert self.proc is not None
        while waiting:
            chunk = await loop.run_in_executor(None, control.read, 4096)  # type: ignore[attr-defined]
            if not chunk:
                await self.proc.wait()
                # let the stderr reader take workerd's last words
                await asyncio.wait(self._readers, timeout=2)
                raise WorkerdFailed(f"workerd exited with status {self.proc.returncode}")
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("event") == "listen":
                        waiting.discard(event.get("socket"))

    async def _pipe(self, stream: asyncio.StreamReader, level: int) -> None:
        while True:
            raw = await stream.readline()
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip("\n")
            if level >= logging.WARNING:
                self._stderr_tail = [*self._stderr_tail[-49:], line]
            worker, line = attribute(line, self.sole_worker)
            log.log(
                level,
                "worker %s: %s",
                worker,
                line,
                extra={
                    "event": "worker_log",
                    "worker": worker,
                    "stream": "stdout" if level == logging.INFO else "stderr",
                },
            )

    async def _watch(self) -> None:
        assert self.proc is not None
        code = await self.proc.wait()
        if not self._stopping and self.on_exit is not None:
            self.on_exit(code)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def stop(self) -> None:
        self._stopping = True
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        if self._readers:
            await asyncio.wait(self._readers, timeout=2)
