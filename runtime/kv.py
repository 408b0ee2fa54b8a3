"""The KV API worker code sees: ``env.MY_KV``, a Workers KV namespace.

Names and options follow Cloudflare's Python Workers: ``await env.KV.get(key, type="json")``,
``getWithMetadata``, ``put(key, value, expirationTtl=60, metadata={...})``, ``delete``,
``list(prefix=..., limit=..., cursor=...)``; an options dict as the last argument works too,
as do snake-case aliases (``get_with_metadata``, ``expiration_ttl``). A limit broken raises
:class:`KvError` with the text a JS Worker's error has ("KV PUT failed: 413 ...").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from runtime._jsdict import JsDict

TYPES = ("text", "json", "arrayBuffer", "stream")
_PUT_TYPES = (
    "KV put() accepts only strings, ArrayBuffers, ArrayBufferViews, and ReadableStreams as values."
)


class KvList:
    """A listing: ``.keys`` (as the JS object's property, not ``dict.keys``),
    ``.list_complete``, ``.cursor`` (None when complete); ``listing["keys"]`` works too."""

    def __init__(self, keys: list[JsDict], list_complete: bool, cursor: str | None) -> None:
        self.keys = keys
        self.list_complete = list_complete
        self.cursor = cursor
        self.cacheStatus = None

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __repr__(self) -> str:
        return f"KvList(keys={self.keys!r}, list_complete={self.list_complete!r})"


class KvError(Exception):
    """A KV call refused: a limit broken, or the store unavailable."""


class KvBackend(Protocol):
    """What ocd plugs in behind a binding; worker code never sees it. Each method raises
    :class:`KvError` with its refusal."""

    async def get(self, key: str) -> tuple[bytes, str | None] | None:
        """The value and its metadata (JSON text), or None."""
        ...

    async def put(
        self,
        key: str,
        value: bytes,
        expiration: str | None,
        expiration_ttl: str | None,
        metadata: str | None,
    ) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def list(
        self, prefix: str | None, limit: int | None, cursor: str | None
    ) -> dict[str, Any]:
        """Workers KV's listing: ``keys`` (name, expiration, metadata as JSON text),
        ``list_complete``, ``cursor``."""
        ...


def _opt(options: Mapping[str, Any] | None, kwargs: Mapping[str, Any], *names: str) -> Any:
    for source in (kwargs, options or {}):
        for name in names:
            if source.get(name) is not None:
                return source[name]
    return None


class KvNamespace:
    """A KV namespace binding. Every method is awaitable; writes return once durable."""

    def __init__(self, backend: KvBackend) -> None:
        self._backend = backend

    async def get(self, key: str, options: Any = None, **kwargs: Any) -> Any:
        """The value as ``type`` asks (``"text"``, the default: a str; ``"json"``: the
        parsed value; ``"arrayBuffer"`` or ``"stream"``: bytes), or None. ``cacheTtl`` is
        accepted and ignored: every read sees the latest write."""
        return (await self.getWithMetadata(key, options, **kwargs))["value"]

    async def getWithMetadata(self, key: str, options: Any = None, **kwargs: Any) -> JsDict:
        """``{"value": ..., "metadata": ..., "cacheStatus": None}``; attribute access works."""
        if isinstance(options, str):
            options = {"type": options}
        kind = _opt(options, kwargs, "type") or "text"
        if kind not in TYPES:
            raise TypeError(
                'Unknown response type. Possible types are "text", "arrayBuffer", "json", '
                'and "stream".'
            )
        found = await self._backend.get(str(key))
        if found is None:
            return JsDict(value=None, metadata=None, cacheStatus=None)
        raw, metadata = found
        value: Any = raw
        if kind == "text":
            value = raw.decode(errors="replace")
        elif kind == "json":
            value = JsDict.deep(json.loads(raw))
        meta = None if metadata is None else JsDict.deep(json.loads(metadata))
        return JsDict(value=value, metadata=meta, cacheStatus=None)

    get_with_metadata = getWithMetadata

    async def put(self, key: str, value: Any, options: Any = None, **kwargs: Any) -> None:
        """Store ``value`` (str, bytes-like); ``expiration`` (epoch seconds) or
        ``expirationTtl`` (seconds, at least 60), and ``metadata`` (JSON-serialisable, at
        most 1,024 bytes as JSON)."""
        if isinstance(value, str):
            data = value.encode()
        elif isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
        else:
            raise TypeError(_PUT_TYPES)
        expiration = _opt(options, kwargs, "expiration")
        ttl = _opt(options, kwargs, "expirationTtl", "expiration_ttl")
        metadata = _opt(options, kwargs, "metadata")
        await self._backend.put(
            str(key),
            data,
            None if expiration is None else str(expiration),
            None if ttl is None else str(ttl),
            None if metadata is None else json.dumps(metadata, separators=(",", ":")),
        )

    async def delete(self, key: str) -> None:
        await self._backend.delete(str(key))

    async def list(self, options: Any = None, **kwargs: Any) -> KvList:
        """``{"keys": [{"name", "expiration"?, "metadata"?}], "list_complete", "cursor"?}``,
        in key order; ``limit`` 1..1000 (default 1000)."""
        limit = _opt(options, kwargs, "limit")
        out = await self._backend.list(
            _opt(options, kwargs, "prefix"), limit, _opt(options, kwargs, "cursor")
        )
        keys = []
        for k in out["keys"]:
            k = dict(k)
            if "metadata" in k:
                k["metadata"] = json.loads(k["metadata"])
            keys.append(JsDict.deep(k))
        return KvList(keys, bool(out["list_complete"]), out.get("cursor"))
