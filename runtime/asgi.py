"""Serving an ASGI application (FastAPI, Starlette, ...) from a worker's ``fetch``::

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            import asgi
            return await asgi.fetch(app, request, self.env)

The app sees ``env`` in its scope (``request.scope["env"]``), as on Cloudflare. One HTTP
request in, one response out: lifespan events and websockets are not run.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from runtime.http import Request, Response

Scope = MutableMapping[str, Any]
App = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Any]


async def fetch(app: App, request: Request, env: Any, ctx: Any = None) -> Response:
    parts = urllib.parse.urlsplit(request.url)
    body = await request.bytes()
    scheme = parts.scheme or "http"
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": scheme,
        "path": urllib.parse.unquote(parts.path) or "/",
        "raw_path": (parts.path or "/").encode("latin-1", errors="replace"),
        "query_string": parts.query.encode("latin-1", errors="replace"),
        "root_path": "",
        "headers": [
            (str(k).lower().encode("latin-1"), str(v).encode("latin-1"))
            for k, v in request.headers.items()
        ],
        "client": None,
        "server": (parts.hostname or "localhost", parts.port or (443 if scheme == "https" else 80)),
        "state": {},
        "env": env,
    }
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The client stays connected until the response is complete: an app listening for
        # a disconnect (a streaming response) waits here until it is cancelled.
        await asyncio.get_running_loop().create_future()
        return {"type": "http.disconnect"}

    status = 500
    headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def send(message: Any) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for k, v in message.get("headers", []):
                headers[k.decode("latin-1")] = v.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    await app(scope, receive, send)
    return Response(b"".join(chunks), status=status, headers=headers)
