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


async def fetch(resource: Any, init: Any = None, /, **kwargs: Any) -> FetchResponse:
    """``await fetch(url, method="POST", headers={...}, body="...")``; ``init`` may be a
    dict of the same options, as in ``js.fetch(url, {"method": "POST"})``."""
    url = str(getattr(resource, "url", resource))
    options = _options(init, kwargs)
    method = str(options.pop("method", "GET")).upper()
    headers = {str(k): str(v) for k, v in dict(options.pop("headers", None) or {}).items()}
    body = options.pop("body", None)
    if isinstance(body, str):
        body = body.encode("utf-8")
    redirect = options.pop("redirect", "follow")
    try:
        async with (
            aiohttp.ClientSession() as session,
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
