"""Where ocd listens: the main listener (worker routes, health and metrics, the REST API, the
dashboard) and, with ``[sqs]``, the SQS endpoint's own; every connection of both goes
through one gate (``ocd.http.guard``).

What the listeners are bound to stays until a restart (``bound``): a reload is judged
against it, not against what the new config says.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

from aiohttp import web

from ocd.config import Config, ServerConfig, SqsConfig
from ocd.errors import StartupError
from ocd.http.body import BODY_POLICY, MIB, BodyPolicy
from ocd.http.browsers import Guard
from ocd.http.cloudflare.envelope import error_response
from ocd.http.guard import Gate, GuardedSite, Timeouts, gate_for
from ocd.http.sqs.app import SqsApp, protocol_error, status_reply
from ocd.http.sqs.context import SqsContext
from ocd.http.sqs.sigv4 import Key, Verifier

log = logging.getLogger(__name__)


class Listeners:
    def __init__(self) -> None:
        self.gate: Gate | None = None  # open connections over every listener, and their cap
        self.runner: web.AppRunner | None = None
        self.sqs_runner: web.AppRunner | None = None
        self.sqs_ctx: SqsContext | None = None  # its verifier follows reloads
        self.port = 0
        self.sqs_port = 0
        self.bound: dict[str, str] = {}  # listener -> host, until a restart

    async def start(self, app: web.Application, server: ServerConfig) -> None:
        """Bind the main listener to ``[server]``'s address; StartupError if it cannot."""
        self.runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=server.shutdown_timeout_s,
            auto_decompress=False,  # ocd.http.body inflates, after auth, within the limit
        )
        await self.runner.setup()
        self.gate = self.gate or gate_for(server.max_connections)
        site = self._site(server, self.runner, server.host, server.port, error_response)
        try:
            await site.start()
        except OSError as e:
            await self.runner.cleanup()
            self.runner = None
            raise StartupError(f"cannot listen on {server.listen}: {e.strerror or e}") from e
        self.port = _bound_port(site) or server.port
        self.bound["server"] = server.host

    async def start_sqs(self, ctx: SqsContext, sqs: SqsConfig, server: ServerConfig) -> None:
        """Bind the SQS endpoint's own listener (after the main one, which a failure here
        closes too); StartupError if it cannot."""
        self.sqs_ctx = ctx
        app = web.Application(client_max_size=2 * MIB)
        app[BODY_POLICY] = BodyPolicy(2 * MIB, server.body_timeout_s)
        also = (urllib.parse.urlsplit(sqs.public_url).hostname or "",) if sqs.public_url else ()
        SqsApp(ctx, Guard(sqs.host, lambda: ctx.verifier is None, also)).add_to(app)
        self.sqs_runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=server.shutdown_timeout_s,
            auto_decompress=False,
        )
        await self.sqs_runner.setup()
        site = self._site(server, self.sqs_runner, sqs.host, sqs.port, status_reply, protocol_error)
        try:
            await site.start()
        except OSError as e:
            await self.sqs_runner.cleanup()
            self.sqs_runner = None
            if self.runner is not None:
                await self.runner.cleanup()
                self.runner = None
            raise StartupError(f"cannot listen on {sqs.listen} (sqs): {e.strerror or e}") from e
        self.sqs_port = _bound_port(site) or sqs.port
        self.bound["sqs"] = sqs.host
        log.info(
            "SQS endpoint on http://%s:%d",
            sqs.host,
            self.sqs_port,
            extra={"event": "sqs_started", "listen": f"{sqs.host}:{self.sqs_port}"},
        )

    def reconfigure(self, config: Config) -> None:
        """SQS keys added, revoked or rotated take effect now."""
        if self.sqs_ctx is not None:
            self.sqs_ctx.verifier = sqs_verifier(config)

    async def stop_accepting(self) -> None:
        """Stop accepting new connections; those open are answered until ``close``."""
        for runner in (self.runner, self.sqs_runner):
            if runner is not None:
                for site in list(runner.sites):
                    await site.stop()

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        if self.sqs_runner is not None:
            await self.sqs_runner.cleanup()
            self.sqs_runner = None

    def _site(
        self,
        s: ServerConfig,
        runner: web.AppRunner,
        host: str,
        port: int,
        error: Any,
        request_error: Any = None,
    ) -> web.TCPSite:
        """A listener with the [server] connection limits (``ocd.http.guard``)."""
        assert self.gate is not None
        timeouts = Timeouts(s.header_timeout_s, s.keepalive_timeout_s)
        return GuardedSite(
            runner,
            host,
            port,
            gate=self.gate,
            timeouts=timeouts,
            error=error,
            request_error=request_error,
        )


def _bound_port(site: web.TCPSite) -> int | None:
    server: Any = site._server  # aiohttp keeps the asyncio Server here; port 0 needs it
    sockets = getattr(server, "sockets", None) or []
    return int(sockets[0].getsockname()[1]) if sockets else None


def sqs_verifier(config: Config) -> Verifier | None:
    """The SQS endpoint's SigV4 gate: every account's ``sqs_keys``; None without accounts."""
    if not config.accounts or config.sqs is None:
        return None
    keys = {
        k.access_key_id: Key(a.id, a.sqs_account_id, k.secret)
        for a in config.accounts
        if a.sqs_account_id is not None
        for k in a.sqs_keys
    }
    return Verifier(keys, True, config.sqs.region)
