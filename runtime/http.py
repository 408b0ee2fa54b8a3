"""Request and Response as Python Workers see them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any


class Request:
    """An incoming HTTP request: ``method``, ``url``, case-insensitive ``headers``, and the body
    through ``await text()``, ``await json()`` or ``await bytes()``."""

    def __init__(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        read_body: Callable[[], Awaitable[bytes]],
    ) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self._read_body = read_body
        self._body: bytes | None = None

    @property
    def js_object(self) -> Request:
        """What Cloudflare's examples hand to ``asgi.fetch``: the request itself here."""
        return self

    async def bytes(self) -> bytes:
        if self._body is None:
            self._body = await self._read_body()
        return self._body

    async def text(self) -> str:
        return (await self.bytes()).decode("utf-8", errors="replace")

    async def json(self) -> Any:
        return json.loads(await self.bytes())

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.url}>"


class Response:
    """An HTTP response from a worker's ``fetch``.

    ``Response("text")``, ``Response(b"bytes", status=201, headers={...})`` or
    ``Response.json({"ok": True})``.
    """

    def __init__(
        self,
        body: str | bytes | bytearray | memoryview | None = None,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        *,
        status_text: str | None = None,
    ) -> None:
        if isinstance(body, str):
            data = body.encode("utf-8")
            default_type = "text/plain;charset=UTF-8"
        elif body is None:
            data = b""
            default_type = None
        else:
            data = bytes(body)
            default_type = "application/octet-stream"
        self.body = data
        self.status = int(status)
        self.status_text = status_text
        self.headers: dict[str, str] = dict(headers or {})
        if default_type and not any(k.lower() == "content-type" for k in self.headers):
            self.headers["Content-Type"] = default_type

    @classmethod
    def json(
        cls, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        merged = {"Content-Type": "application/json"}
        merged.update(headers or {})
        return cls(json.dumps(data), status=status, headers=merged)

    @classmethod
    def redirect(cls, url: str, status: int = 302) -> Response:
        return cls(None, status=status, headers={"Location": url})

    def __repr__(self) -> str:
        return f"<Response {self.status} {len(self.body)} bytes>"
