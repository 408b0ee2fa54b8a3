"""Serving a WSGI application (Django, Flask, ...) from a worker's ``fetch``::

    from workers import WorkerEntrypoint, wsgi

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            return await wsgi.fetch(application, request, self.env)

The application runs in a thread, so its blocking calls do not stop the event loop; the
bindings are in ``environ["workers.env"]``.
"""

from __future__ import annotations

import asyncio
import io
import sys
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from runtime.http import Request, Response

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


async def fetch(app: App, request: Request, env: Any, ctx: Any = None) -> Response:
    parts = urllib.parse.urlsplit(request.url)
    body = await request.bytes()
    scheme = parts.scheme or "http"
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": urllib.parse.unquote(parts.path) or "/",
        "QUERY_STRING": parts.query,
        "SERVER_NAME": parts.hostname or "localhost",
        "SERVER_PORT": str(parts.port or (443 if scheme == "https" else 80)),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "workers.env": env,
    }
    for k, v in request.headers.items():
        key = str(k).upper().replace("-", "_")
        if key == "CONTENT_TYPE":
            environ["CONTENT_TYPE"] = str(v)
        elif key != "CONTENT_LENGTH":
            environ[f"HTTP_{key}"] = str(v)
    return await asyncio.to_thread(_run, app, environ)


def _run(app: App, environ: dict[str, Any]) -> Response:
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started[:] = [status, headers]
        return lambda data: chunks.append(data)

    chunks: list[bytes] = []
    result = app(environ, start_response)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    status, headers = started
    code, _, reason = str(status).partition(" ")
    return Response(b"".join(chunks), status=int(code), headers=dict(headers), status_text=reason)
