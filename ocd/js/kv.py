"""workerd's KV protocol, served to workerd alone on a private unix socket.

A ``kvNamespace`` binding makes ``env.KV`` in a JS Worker, whose calls workerd turns into
HTTP requests to the binding's service, which injects ``X-Ocd-Worker``, ``X-Ocd-Binding``
and the start's secret (as for queue producers, ``ocd.js.producer``):

- ``GET /<key>?urlencoded=true[&cache_ttl=]``: the value (workerd decodes it as the call's
  type asks), its metadata in ``CF-KV-Metadata``; 404 when there is none.
- ``PUT /<key>?urlencoded=true[&expiration=|&expiration_ttl=]``, metadata in
  ``CF-KV-Metadata``, the value as the body: answered once durable.
- ``DELETE /<key>?urlencoded=true``.
- ``GET /?[key_count_limit=][&prefix=][&cursor=]``: a listing as JSON.
- ``POST /bulk/get``: ``get()`` of an array of keys.

A refusal is a status with Cloudflare's text as its reason, which workerd puts in the error
it throws ("KV PUT failed: 413 Value length of ... exceeds limit of ...").
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from ocd import limits
from ocd.errors import KvRefused, StoreError, StoreFull
from ocd.kv import KvService, listing_json
from ocd.store import KvNamespace

BULK_KEYS = 100  # keys per get() of an array, as Workers KV
READ_CHUNK = 256 * 1024


class KvEndpoint:
    """``bindings``: (worker, binding) -> namespace."""

    def __init__(
        self,
        kv: KvService | None,
        secret: str,
        bindings: Mapping[tuple[str, str], KvNamespace],
    ) -> None:
        self.kv = kv
        self.secret = f"Bearer {secret}".encode()
        self.bindings = dict(bindings)

    def app(self) -> web.Application:
        # the body of a put is read by hand, counting it against KV's own limit
        app = web.Application(client_max_size=1024 * 1024, middlewares=[_answer_refusals])
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    def _namespace(self, request: web.Request) -> tuple[KvService, KvNamespace]:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self.secret):
            raise KvRefused(403, "not allowed")
        key = (request.headers.get("X-Ocd-Worker", ""), request.headers.get("X-Ocd-Binding", ""))
        ns = self.bindings.get(key)
        if ns is None:
            raise KvRefused(403, f"no KV binding {key[1]} of worker {key[0]}")
        if self.kv is None:  # check-config's trial start of workerd
            raise KvRefused(503, "ocd is only checking this config")
        return self.kv, ns

    async def handle(self, request: web.Request) -> web.StreamResponse:
        kv, ns = self._namespace(request)
        path = request.raw_path.split("?", 1)[0]
        q = request.query
        try:
            if path == "/bulk/get" and request.method == "POST":
                return await self._bulk(kv, ns, request)
            if path == "/":
                if request.method != "GET":
                    raise KvRefused(405, "Method Not Allowed")
                listing = await kv.list(
                    ns, q.get("prefix"), q.get("key_count_limit"), q.get("cursor")
                )
                return web.json_response(listing_json(listing))
            key = unquote(path[1:], errors="strict")
            if request.method == "GET":
                entry = await kv.get(ns, key)
                if entry is None:
                    return web.Response(status=404)
                headers = {}
                if entry.metadata is not None:
                    headers["CF-KV-Metadata"] = entry.metadata
                if entry.expires_ms is not None:
                    headers["CF-Expiration"] = str(entry.expires_ms // 1000)
                return web.Response(body=entry.value, headers=headers)
            if request.method == "PUT":
                value = await _body(request)
                await kv.put(
                    ns,
                    key,
                    value,
                    q.get("expiration"),
                    q.get("expiration_ttl"),
                    request.headers.get("CF-KV-Metadata"),
                )
                return web.Response()
            if request.method == "DELETE":
                await kv.delete(ns, key)
                return web.Response()
            raise KvRefused(405, "Method Not Allowed")
        except UnicodeDecodeError:
            raise KvRefused(400, "Could not URL-decode key name") from None
        except StoreFull as e:
            raise KvRefused(507, f"storage full: {e}") from None
        except StoreError as e:
            raise KvRefused(503, f"Service temporarily unavailable: {e}") from None

    async def _bulk(self, kv: KvService, ns: KvNamespace, request: web.Request) -> web.Response:
        try:
            ask = json.loads(await request.read())
            keys = ask["keys"]
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            raise KvRefused(400, "invalid bulk get") from None
        kind = ask.get("type") or "text"
        if kind not in ("text", "json"):
            raise KvRefused(400, f'"{kind}" is not a valid type. Use "json" or "text"')
        if not keys:
            raise KvRefused(400, "You must request a minimum of 1 key")
        if len(keys) > BULK_KEYS:
            raise KvRefused(400, f"You can request a maximum of {BULK_KEYS} keys")
        out: dict[str, Any] = {}
        for key in keys:
            entry = await kv.get(ns, key)
            value: Any = None
            if entry is not None:
                text = entry.value.decode(errors="replace")
                try:
                    value = json.loads(text) if kind == "json" else text
                except ValueError:
                    raise KvRefused(
                        400, f"At least one of the requested keys corresponds to a non-{kind} value"
                    ) from None
                if ask.get("withMetadata"):
                    meta = None if entry.metadata is None else json.loads(entry.metadata)
                    value = {"value": value, "metadata": meta}
            out[key] = value
        return web.json_response(out)


async def _body(request: web.Request) -> bytes:
    """The value of a put, refused past ``KV_VALUE_BYTES`` with its whole length (the rest
    is read and dropped, so the error says how long it was and workerd's connection stays
    usable)."""
    chunks: list[bytes] = []
    n = 0
    async for chunk in request.content.iter_chunked(READ_CHUNK):
        n += len(chunk)
        if n <= limits.KV_VALUE_BYTES:
            chunks.append(chunk)
    if n > limits.KV_VALUE_BYTES:
        chunks.clear()
        raise KvRefused(413, f"Value length of {n} exceeds limit of {limits.KV_VALUE_BYTES}.")
    return b"".join(chunks)


@web.middleware
async def _answer_refusals(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except KvRefused as r:
        text = " ".join(r.message.split())[:300]
        reason = text.encode("ascii", "replace").decode()
        return web.Response(status=r.status, reason=reason, text=text)
