"""A thin client for ocd's Cloudflare-style REST API, over real HTTP to a running daemon."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from typing import Any

import aiohttp

from tests.integration.conftest import Running

PREFIX = "/client/v4"
_UNSET: Any = object()


def sha256_hex(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def accounts_toml(tokens: dict[str, str]) -> str:
    """``[[accounts]]`` entries: account id -> the one token it accepts."""
    return "".join(
        f'\n[[accounts]]\nid = "{a}"\ntoken_sha256 = ["{sha256_hex(t)}"]\n'
        for a, t in tokens.items()
    )


class Rest:
    """Calls ``/client/v4/accounts/{account}/...`` as one account with one token."""

    def __init__(self, running: Running, account: str = "local", token: str | None = "t") -> None:
        self.running = running
        self.session: aiohttp.ClientSession = running.session
        self.account = account
        self.token = token

    def url(self, path: str, account: str | None = None) -> str:
        return f"{self.running.base}{PREFIX}/accounts/{account or self.account}{path}"

    async def call(
        self,
        method: str,
        path: str,
        body: Any = _UNSET,
        *,
        data: bytes | None = None,
        token: Any = _UNSET,
        account: str | None = None,
        params: Any = None,
    ) -> tuple[int, dict[str, Any]]:
        token = self.token if token is _UNSET else token
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        kwargs: dict[str, Any] = {"headers": headers, "params": params}
        if data is None and body is not _UNSET:
            data = json.dumps(body).encode()
        if data is not None:
            kwargs["data"] = io.BytesIO(data)  # aiohttp warns about large raw bytes
            headers["Content-Type"] = "application/json"
        async with self.session.request(method, self.url(path, account), **kwargs) as r:
            return r.status, await r.json()

    async def ok(self, method: str, path: str, body: Any = _UNSET, **kw: Any) -> Any:
        status, out = await self.call(method, path, body, **kw)
        assert status == 200 and out["success"] is True, (status, out)
        return out["result"]

    # ---------------------------------------------------------------- shortcuts

    async def create_queue(self, name: str, **settings: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"queue_name": name}
        if settings:
            body["settings"] = settings
        result: dict[str, Any] = await self.ok("POST", "/queues", body)
        return result

    async def pull_consumer(self, queue: str, dlq: str | None = None, **settings: Any) -> Any:
        body: dict[str, Any] = {"type": "http_pull", "settings": settings}
        if dlq is not None:
            body["dead_letter_queue"] = dlq
        return await self.ok("POST", f"/queues/{queue}/consumers", body)

    async def push(self, queue: str, body: Any, content_type: str = "json", **kw: Any) -> Any:
        return await self.ok(
            "POST", f"/queues/{queue}/messages", {"body": body, "content_type": content_type, **kw}
        )

    async def pull(self, queue: str, **body: Any) -> Any:
        return await self.ok("POST", f"/queues/{queue}/messages/pull", body)

    async def ack(
        self, queue: str, acks: Sequence[str] = (), retries: Sequence[dict[str, Any]] = ()
    ) -> Any:
        return await self.ok(
            "POST",
            f"/queues/{queue}/messages/ack",
            {"acks": [{"lease_id": lease} for lease in acks], "retries": list(retries)},
        )

    async def backlog(self, queue: str) -> int:
        metrics = await self.ok("GET", f"/queues/{queue}/metrics")
        return int(metrics["backlog_count"])
