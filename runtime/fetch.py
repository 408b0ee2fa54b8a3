"""Outgoing HTTP for worker code: ``workers.fetch``, ``js.fetch`` and ``pyodide.http.pyfetch``.

All three answer a :class:`FetchResponse`, read whole before it is returned, that offers both
pyodide's Python names (``status_text``, ``await bytes()``, ``raise_for_status()``) and the
JavaScript ones (``statusText``, ``await arrayBuffer()``, ``headers.get(...)``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp
from multidict import CIMultiDict

from runtime.values import JsBytes, as_js_value


class FetchError(OSError):
    """The request could not be made (connection refused, bad URL, ...)."""


class FetchResponse:
    def __init__(
        self, url: str, status: int, status_text: str, headers: CIMultiDict[str], body: bytes
    ) -> None:
        self.url = url
        self.status = status
        self.status_text = status_text
        self.statusText = status_text
        self.headers = headers
        self.body = body
        self.ok = 200 <= status < 300
        self.redirected = False
        self.type = "basic"
        self.body_used = False
        self.bodyUsed = False

    async def bytes(self) -> JsBytes:
        return JsBytes(self.body)

    async def arrayBuffer(self) -> JsBytes:
        return JsBytes(self.body)

    buffer = arrayBuffer

    async def memoryview(self) -> memoryview:
        return memoryview(self.body)

    async def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    string = text

    async def json(self, **kwargs: Any) -> Any:
        return as_js_value(json.loads(self.body, **kwargs))

    def clone(self) -> FetchResponse:
        return FetchResponse(
            self.url, self.status, self.status_text, CIMultiDict(self.headers), self.body
        )

    def raise_for_status(self) -> None:
        if self.status >= 400:
            kind = "Client" if self.status < 500 else "Server"
            raise OSError(f"{self.status} {kind} Error: {self.status_text} for url: {self.url}")

    @property
    def js_object(self) -> FetchResponse:
        return self

    def __repr__(self) -> str:
        return f"<FetchResponse {self.status} {self.url}>"


def _options(init: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if isinstance(init, Mapping):
        options.update(init)
    elif init is not None:
        raise TypeError("fetch() options must be a dict like {'method': 'POST'}")
    options.update(kwargs)
    return options


_HOP_BY_HOP = ("host", "content-length", "transfer-encoding", "connection", "keep-alive")


class Outgoing:
    """A request to send, from ``fetch``'s arguments."""

    def __init__(self, method: str, url: str, headers: dict[str, str], body: Any, redirect: str):
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.redirect = redirect


async def outgoing(resource: Any, init: Any, kwargs: Mapping[str, Any]) -> Outgoing:
    """``fetch``'s arguments as one request; an incoming :class:`~runtime.Request` as the
    resource gives its method, headers and body unless the options set them."""
    url = str(getattr(resource, "url", resource))
    options = _options(init, kwargs)
    from runtime.http import Request  # runtime.http imports nothing of this module

    passed = isinstance(resource, Request)
    method = str(options.pop("method", resource.method if passed else "GET")).upper()
    given = options.pop("headers", None)
    inherited = given is None and passed
    headers = {
        str(k): str(v) for k, v in dict(resource.headers if inherited else given or {}).items()
    }
    if inherited:  # those of the connection it came on are not the request's
        headers = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
    if "body" in options:
        body = options.pop("body")
    else:
        body = await resource.bytes() if passed and method not in ("GET", "HEAD") else None
    if isinstance(body, str):
        body = body.encode("utf-8")
    return Outgoing(method, url, headers, body, str(options.pop("redirect", "follow")))


async def fetch(resource: Any, init: Any = None, /, **kwargs: Any) -> FetchResponse:
    """``await fetch(url, method="POST", headers={...}, body="...")``; ``init`` may be a
    dict of the same options, as in ``js.fetch(url, {"method": "POST"})``."""
    return await send(aiohttp.ClientSession(), await outgoing(resource, init, kwargs))


async def send(session: aiohttp.ClientSession, request: Outgoing) -> FetchResponse:
    """``request`` over ``session`` (closed after), its answer read whole."""
    method, url, headers, body = request.method, request.url, request.headers, request.body
    redirect = request.redirect
    try:
        async with (
            session,
            session.request(
                method,
                url,
                headers=headers,
                data=body,
                allow_redirects=redirect == "follow",
            ) as r,
        ):
            data = await r.read()
            response = FetchResponse(
                str(r.url), r.status, r.reason or "", CIMultiDict(r.headers), data
            )
            response.redirected = bool(r.history)
            return response
    except (aiohttp.ClientError, ValueError) as e:
        raise FetchError(f"fetch {method} {url} failed: {e}") from e
