"""KV namespaces: Workers KV's semantics over the store's ``Kv`` facet.

The one place their limits are checked, with Cloudflare's texts and statuses
(``KvRefused``), for every surface: workerd's KV protocol (``ocd.js.kv``) and the Python
binding (``env.KV``). Expiry is absolute epoch seconds on the surface (Cloudflare's
``expiration``) and epoch milliseconds in the store; a listing's cursor is opaque to the
caller and is the last key it returned.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

import runtime
from ocd import limits
from ocd.clock import Clock, wall_ms
from ocd.errors import KvRefused
from ocd.store import Kv as KvStore
from ocd.store import KvEntry, KvKey, KvNamespace


@dataclass(frozen=True, slots=True)
class Listing:
    keys: list[KvKey]
    complete: bool
    cursor: str | None  # None when complete


def check_key(key: str) -> None:
    if key == "":
        raise KvRefused(400, "Key names must not be empty")
    if key in (".", ".."):
        raise KvRefused(400, f'Illegal key name "{key}". Please use a different name.')
    check_key_length(key)


def check_key_length(key: str) -> None:
    n = len(key.encode("utf-8", "surrogatepass"))
    if n > limits.KV_KEY_BYTES:
        raise KvRefused(
            414, f"UTF-8 encoded length of {n} exceeds key length limit of {limits.KV_KEY_BYTES}."
        )


def expiry_ms(now_ms: int, expiration: str | None, expiration_ttl: str | None) -> int | None:
    """When a put's key expires (epoch ms), from Cloudflare's ``expiration`` (epoch seconds)
    or ``expiration_ttl`` (seconds from now; it wins when both are given)."""
    now_s = now_ms // 1000
    if expiration_ttl is not None:
        ttl = _integer(expiration_ttl)
        if ttl is None or ttl <= 0:
            raise KvRefused(
                400,
                f"Invalid expiration_ttl of {expiration_ttl}. "
                "Please specify integer greater than 0.",
            )
        if ttl < limits.KV_MIN_TTL_S:
            raise KvRefused(
                400,
                f"Invalid expiration_ttl of {expiration_ttl}. "
                f"Expiration TTL must be at least {limits.KV_MIN_TTL_S}.",
            )
        return (now_s + ttl) * 1000
    if expiration is not None:
        at = _integer(expiration)
        if at is None or at <= now_s:
            raise KvRefused(
                400,
                f"Invalid expiration of {expiration}. Please specify integer greater than the "
                "current number of seconds since the UNIX epoch.",
            )
        if at < now_s + limits.KV_MIN_TTL_S:
            raise KvRefused(
                400,
                f"Invalid expiration of {expiration}. Expiration times must be at least "
                f"{limits.KV_MIN_TTL_S} seconds in the future.",
            )
        return at * 1000
    return None


def check_metadata(metadata: str | None) -> None:
    if metadata is None:
        return
    n = len(metadata.encode())
    if n > limits.KV_METADATA_BYTES:
        raise KvRefused(413, f"Metadata length of {n} exceeds limit of {limits.KV_METADATA_BYTES}.")
    try:
        json.loads(metadata)
    except ValueError:
        raise KvRefused(400, "Metadata must be JSON") from None


def check_value_length(n: int) -> None:
    if n > limits.KV_VALUE_BYTES:
        raise KvRefused(413, f"Value length of {n} exceeds limit of {limits.KV_VALUE_BYTES}.")


def list_limit(raw: str | int | None) -> int:
    if raw is None:
        return limits.KV_LIST_KEYS.high
    n = _integer(str(raw))
    if n is None or n < limits.KV_LIST_KEYS.low:
        raise KvRefused(
            400, f"Invalid key_count_limit of {raw}. Please specify an integer greater than 0."
        )
    if n > limits.KV_LIST_KEYS.high:
        raise KvRefused(
            400,
            f"Invalid key_count_limit of {raw}. "
            f"Please specify an integer less than {limits.KV_LIST_KEYS.high}.",
        )
    return n


def encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode("utf-8", "surrogatepass")).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return raw.decode()
    except (binascii.Error, ValueError):
        raise KvRefused(400, f"Invalid cursor {cursor!r}") from None


def _integer(raw: str) -> int | None:
    try:
        return int(raw)
    except ValueError:
        return None


class KvService:
    """The KV operations every surface calls; time from ``clock``."""

    def __init__(self, store: KvStore, clock: Clock = wall_ms) -> None:
        self.store = store
        self.clock = clock

    async def get(self, ns: KvNamespace, key: str) -> KvEntry | None:
        check_key(key)
        return await self.store.kv_get(ns, key, self.clock())

    async def put(
        self,
        ns: KvNamespace,
        key: str,
        value: bytes,
        expiration: str | None = None,
        expiration_ttl: str | None = None,
        metadata: str | None = None,
    ) -> None:
        """Put ``value``; ``metadata`` is JSON text. Returns once durable."""
        check_key(key)
        expires = expiry_ms(self.clock(), expiration, expiration_ttl)
        check_metadata(metadata)
        check_value_length(len(value))
        await self.store.kv_put(ns, key, KvEntry(value, expires, metadata))

    async def delete(self, ns: KvNamespace, key: str) -> None:
        check_key(key)
        await self.store.kv_delete(ns, key)

    async def list(
        self,
        ns: KvNamespace,
        prefix: str | None = None,
        limit: str | int | None = None,
        cursor: str | None = None,
    ) -> Listing:
        n = list_limit(limit)
        if prefix:
            check_key_length(prefix)
        after = decode_cursor(cursor) if cursor else None
        page = await self.store.kv_list(ns, self.clock(), prefix or "", after, n)
        last = None if page.complete or not page.keys else encode_cursor(page.keys[-1].name)
        return Listing(page.keys, page.complete, last)


def listing_json(listing: Listing) -> dict[str, object]:
    """A listing as Workers KV's ``list()`` resolves it: expiration in epoch seconds;
    metadata left as JSON text (workerd parses it; the Python binding does too)."""
    keys: list[dict[str, object]] = []
    for k in listing.keys:
        entry: dict[str, object] = {"name": k.name}
        if k.expires_ms is not None:
            entry["expiration"] = k.expires_ms // 1000
        if k.metadata is not None:
            entry["metadata"] = k.metadata
        keys.append(entry)
    out: dict[str, object] = {"keys": keys, "list_complete": listing.complete}
    if listing.cursor is not None:
        out["cursor"] = listing.cursor
    out["cacheStatus"] = None
    return out


class KvBinding:
    """A Python worker's ``env.<binding>`` backend (``runtime.KvBackend``): one namespace
    of ``service``, refusals as ``runtime.KvError`` with the text a JS Worker sees."""

    def __init__(self, service: KvService, ns: KvNamespace) -> None:
        self.service = service
        self.ns = ns

    async def get(self, key: str) -> tuple[bytes, str | None] | None:
        try:
            entry = await self.service.get(self.ns, key)
        except KvRefused as e:
            raise runtime.KvError(f"KV GET failed: {e.status} {e.message}") from None
        return None if entry is None else (entry.value, entry.metadata)

    async def put(
        self,
        key: str,
        value: bytes,
        expiration: str | None,
        expiration_ttl: str | None,
        metadata: str | None,
    ) -> None:
        try:
            await self.service.put(self.ns, key, value, expiration, expiration_ttl, metadata)
        except KvRefused as e:
            raise runtime.KvError(f"KV PUT failed: {e.status} {e.message}") from None

    async def delete(self, key: str) -> None:
        try:
            await self.service.delete(self.ns, key)
        except KvRefused as e:
            raise runtime.KvError(f"KV DELETE failed: {e.status} {e.message}") from None

    async def list(
        self, prefix: str | None, limit: int | None, cursor: str | None
    ) -> dict[str, object]:
        try:
            listing = await self.service.list(self.ns, prefix, limit, cursor)
        except KvRefused as e:
            raise runtime.KvError(f"KV GET failed: {e.status} {e.message}") from None
        return listing_json(listing)
