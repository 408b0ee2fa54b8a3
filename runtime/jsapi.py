"""The ``js`` module as Python Workers code uses it: ``Object``, ``JSON``, ``console``,
``Response``, ``Request``, ``Headers``, ``URL``, ``fetch``.

JavaScript constructors are called as ``X.new(...)`` under Pyodide; here they answer the
Python values ocd's runtime uses (``js.Response.new("hi")`` is a ``workers.Response``).
Other names (``HTMLRewriter``, ``WebSocketPair``, ...) import as placeholders that ocd's
loader refuses.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from multidict import CIMultiDict

from runtime.fetch import fetch
from runtime.http import Request as _Request
from runtime.http import Response as _Response
from runtime.unsupported import Unsupported
from runtime.values import JsList, as_js_value


class _ObjectType:
    @staticmethod
    def fromEntries(entries: Iterable[Any] | Mapping[str, Any]) -> dict[str, Any]:
        pairs: dict[str, Any] = dict(entries)
        return as_js_value(pairs)  # type: ignore[no-any-return]

    @staticmethod
    def keys(obj: Mapping[str, Any]) -> list[str]:
        return JsList(obj.keys())

    @staticmethod
    def values(obj: Mapping[str, Any]) -> list[Any]:
        return JsList(obj.values())

    @staticmethod
    def entries(obj: Mapping[str, Any]) -> list[list[Any]]:
        return JsList(JsList([k, v]) for k, v in obj.items())

    @staticmethod
    def assign(target: dict[str, Any], *sources: Mapping[str, Any]) -> dict[str, Any]:
        for s in sources:
            target.update(s)
        return target

    @staticmethod
    def new() -> dict[str, Any]:
        return as_js_value({})  # type: ignore[no-any-return]


class _JSONType:
    @staticmethod
    def stringify(value: Any, replacer: Any = None, space: Any = None) -> str:
        if space:
            return json.dumps(value, ensure_ascii=False, indent=space)
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def parse(text: str | bytes) -> Any:
        return as_js_value(json.loads(text))


class _Console:
    """``console.log`` prints to stdout like ``print``; ``warn`` and ``error`` to stderr."""

    @staticmethod
    def _line(args: tuple[Any, ...]) -> str:
        return " ".join(a if isinstance(a, str) else repr(a) for a in args)

    def log(self, *args: Any) -> None:
        print(self._line(args), flush=True)

    info = debug = log

    def warn(self, *args: Any) -> None:
        print(self._line(args), file=sys.stderr, flush=True)

    error = warn


class Headers(CIMultiDict[str]):
    """Case-insensitive headers with the Fetch API's methods."""

    @classmethod
    def new(cls, init: Mapping[str, str] | Iterable[tuple[str, str]] | None = None) -> Headers:
        return cls(init or {})

    def has(self, name: str) -> bool:
        return name in self

    def set(self, name: str, value: str) -> None:
        self[name] = str(value)

    def append(self, name: str, value: str) -> None:
        self.add(name, str(value))

    def delete(self, name: str) -> None:
        self.popall(name, None)

    def entries(self) -> list[tuple[str, str]]:
        return list(self.items())


class _ResponseType:
    @staticmethod
    def new(body: Any = None, init: Mapping[str, Any] | None = None) -> _Response:
        init = init or {}
        return _Response(
            body,
            status=int(init.get("status", 200)),
            headers=dict(init.get("headers") or {}),
            status_text=init.get("statusText"),
        )

    @staticmethod
    def json(data: Any, init: Mapping[str, Any] | None = None) -> _Response:
        init = init or {}
        return _Response.json(
            data, status=int(init.get("status", 200)), headers=dict(init.get("headers") or {})
        )

    @staticmethod
    def redirect(url: str, status: int = 302) -> _Response:
        return _Response.redirect(url, status)


class _RequestType:
    @staticmethod
    def new(url: str, init: Mapping[str, Any] | None = None) -> _Request:
        init = init or {}
        body = init.get("body") or b""
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)

        async def read() -> bytes:
            return data

        headers = Headers(dict(init.get("headers") or {}))
        return _Request(str(init.get("method", "GET")).upper(), url, headers, read)


class URLSearchParams:
    def __init__(self, query: str) -> None:
        self._pairs = urllib.parse.parse_qsl(query.lstrip("?"), keep_blank_values=True)

    def get(self, name: str) -> str | None:
        return next((v for k, v in self._pairs if k == name), None)

    def getAll(self, name: str) -> list[str]:
        return [v for k, v in self._pairs if k == name]

    def has(self, name: str) -> bool:
        return any(k == name for k, _ in self._pairs)

    def toString(self) -> str:
        return urllib.parse.urlencode(self._pairs)


class URL:
    """``js.URL.new("https://a.example/p?q=1")``: ``pathname``, ``searchParams``, ..."""

    def __init__(self, url: str, base: str | None = None) -> None:
        self.href = urllib.parse.urljoin(base, url) if base else url
        parts = urllib.parse.urlsplit(self.href)
        self.protocol = f"{parts.scheme}:"
        self.host = parts.netloc.rpartition("@")[2]
        self.hostname = parts.hostname or ""
        self.port = str(parts.port) if parts.port else ""
        self.pathname = parts.path or "/"
        self.search = f"?{parts.query}" if parts.query else ""
        self.hash = f"#{parts.fragment}" if parts.fragment else ""
        self.origin = f"{parts.scheme}://{self.host}"
        self.searchParams = URLSearchParams(parts.query)

    @classmethod
    def new(cls, url: str, base: str | None = None) -> URL:
        return cls(url, base)

    def toString(self) -> str:
        return self.href

    def __str__(self) -> str:
        return self.href


class _DateType:
    @staticmethod
    def now() -> int:
        return int(time.time() * 1000)


Object = _ObjectType()
JSON = _JSONType()
console = _Console()
Response = _ResponseType()
Request = _RequestType()
Date = _DateType()

__all__ = [
    "JSON",
    "URL",
    "Date",
    "Headers",
    "Object",
    "Request",
    "Response",
    "URLSearchParams",
    "console",
    "fetch",
    "placeholder",
]


def placeholder(name: str) -> Unsupported:
    """What ``from js import <name>`` gives for a name ocd does not provide."""
    return Unsupported(f"js.{name}")
