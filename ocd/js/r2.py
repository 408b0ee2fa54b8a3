"""workerd's R2 protocol, served to workerd alone on a private unix socket.

An ``r2Bucket`` binding makes ``env.BUCKET`` in a JS Worker; workerd sends each call to the
binding's service (which injects ``X-Ocd-Worker``, ``X-Ocd-Binding`` and the start's secret,
as for KV) as one of two requests, the call itself a JSON object whose ``method`` names it
(workerd's ``r2-api.capnp``; its 64-bit numbers arrive as strings):

- ``GET`` with the call in the ``cf-r2-request`` header: ``head``, ``get``, ``list``.
- ``PUT`` whose body is the call (``cf-r2-metadata-size`` bytes of JSON) followed by the
  value: ``put``, ``delete``, ``createMultipartUpload``, ``uploadPart``,
  ``completeMultipartUpload``, ``abortMultipartUpload``.

An answer's body is its JSON (an object's properties, a listing), ``cf-r2-metadata-size``
bytes long, followed by the object's bytes for a ``get``. A refusal is its status with
``cf-r2-error: {"version": 1, "v4code": ..., "message": ...}``; workerd turns a 404 of
``head``/``get`` into ``null`` and a 412 into ``null`` (put) or the object without a body
(get, which is why that answer carries the object's properties).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import AsyncIterator, Mapping
from functools import partial
from typing import Any

from aiohttp import web

from ocd import limits
from ocd.errors import R2Refused, StoreError
from ocd.r2 import (
    Bucket,
    Conditional,
    Etag,
    R2Service,
    byte_range,
    decode_cursor,
    invalid,
    precondition_failed,
)
from ocd.store.sqlite.r2 import ObjectRow

NONE_U64 = 2**64 - 1  # capnp's "not set" for the protocol's UInt64 fields
META_MAX = 1024 * 1024
READ_CHUNK = 256 * 1024
CHECKSUM_SLOTS = {"md5": "0", "sha1": "1", "sha256": "2", "sha384": "3", "sha512": "4"}


class R2Endpoint:
    """``bindings``: (worker, binding) -> bucket name."""

    def __init__(
        self, r2: R2Service | None, secret: str, bindings: Mapping[tuple[str, str], str]
    ) -> None:
        self.r2 = r2
        self.secret = f"Bearer {secret}".encode()
        self.bindings = dict(bindings)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=META_MAX, middlewares=[_answer_refusals])
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    def _bucket(self, request: web.Request) -> Bucket:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self.secret):
            raise R2Refused(403, 10001, "not allowed")
        key = (request.headers.get("X-Ocd-Worker", ""), request.headers.get("X-Ocd-Binding", ""))
        name = self.bindings.get(key)
        if name is None:
            raise R2Refused(403, 10001, f"no R2 binding {key[1]} of worker {key[0]}")
        if self.r2 is None:  # check-config's trial start of workerd
            raise R2Refused(503, 10001, "ocd is only checking this config")
        return self.r2.bucket(name)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        bucket = self._bucket(request)
        try:
            if request.method == "GET":
                return await self._read(
                    bucket, request, _call(request.headers.get("cf-r2-request"))
                )
            if request.method == "PUT":
                return await self._write(bucket, request)
            raise invalid("Method Not Allowed")
        except StoreError as e:
            raise R2Refused(503, 10001, f"We encountered an internal error: {e}") from None

    async def _read(
        self, bucket: Bucket, request: web.Request, call: dict[str, Any]
    ) -> web.StreamResponse:
        method = call.get("method")
        if method == "head":
            row = await bucket.head(_text(call, "object"))
            return _metadata(_object_json(row, (0, row.size)))
        if method == "get":
            rng = call.get("range") or {}
            ranged = partial(
                _ranged,
                _u64(rng.get("offset")),
                _u64(rng.get("length")),
                _u64(rng.get("suffix")),
                call.get("rangeHeader"),
            )
            row, start, length, body = await bucket.get(
                _text(call, "object"), _conditional(call.get("onlyIf")), ranged
            )
            meta = json.dumps(_object_json(row, (start, length))).encode()
            response = web.StreamResponse(
                headers={"cf-r2-metadata-size": str(len(meta)), "Content-Type": "application/json"}
            )
            response.content_length = len(meta) + length
            try:
                await response.prepare(request)
                await response.write(meta)
                async for chunk in body.chunks():
                    await response.write(chunk)
            finally:
                body.close()
            await response.write_eof()
            return response
        if method == "list":
            return await self._list(bucket, call)
        raise invalid(f"unknown R2 method {method!r}")

    async def _list(self, bucket: Bucket, call: dict[str, Any]) -> web.Response:
        include = {int(i) for i in call.get("include") or ()}
        limit = _u32(call.get("limit"))
        if limit is None:
            limit = limits.R2_LIST_KEYS.high
        if include and limit in limits.R2_LIST_KEYS:
            limit = min(limit, limits.R2_LIST_WITH_METADATA)
        after = call.get("startAfter") or None
        if call.get("cursor"):
            from_cursor = decode_cursor(call["cursor"])
            after = from_cursor if after is None or from_cursor > after else after
        delimiter = call.get("delimiter") or None
        page = await bucket.listing(call.get("prefix") or "", after, delimiter, limit)
        objects = [
            _object_json(row, None, http=0 in include, custom=1 in include) for row in page.objects
        ]
        out: dict[str, Any] = {
            "objects": objects,
            "truncated": page.cursor is not None,
            "delimitedPrefixes": page.prefixes,
        }
        if page.cursor is not None:
            out["cursor"] = page.cursor
        return _metadata(out)

    async def _write(self, bucket: Bucket, request: web.Request) -> web.Response:
        try:
            n = int(request.headers.get("cf-r2-metadata-size", ""))
            if not 0 < n <= META_MAX:
                raise ValueError
            call = json.loads(await request.content.readexactly(n))
            if not isinstance(call, dict):
                raise ValueError
        except (ValueError, EOFError):
            raise R2Refused(400, 10029, "Metadata missing or invalid") from None
        method = call.get("method")
        key = _text(call, "object") if method != "delete" else ""
        if method == "put":
            row = await bucket.put(
                key,
                _value(request),
                _http(call.get("httpFields")),
                _custom(call.get("customFields")),
                _conditional(call.get("onlyIf")),
                _hashes(call),
            )
            if row is None:
                raise precondition_failed()
            return _metadata(_object_json(row, None))
        if method == "delete":
            keys = call.get("objects") if "objects" in call else [call.get("object")]
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise invalid("Metadata missing or invalid")
            if len(keys) > limits.R2_DELETE_KEYS:
                raise invalid(f"You can delete at most {limits.R2_DELETE_KEYS} objects at once.")
            await bucket.delete(keys)
            return web.Response()
        if method == "createMultipartUpload":
            upload_id = await bucket.create_upload(
                key, _http(call.get("httpFields")), _custom(call.get("customFields"))
            )
            return _metadata({"uploadId": upload_id})
        if method == "uploadPart":
            number = call.get("partNumber")
            if not isinstance(number, int):
                raise invalid("Metadata missing or invalid")
            etag = await bucket.upload_part(key, _text(call, "uploadId"), number, _value(request))
            return _metadata({"etag": etag})
        if method == "completeMultipartUpload":
            parts = call.get("parts")
            try:
                chosen = [(int(p["part"]), str(p["etag"])) for p in parts or ()]
            except (KeyError, TypeError, ValueError):
                raise invalid("Metadata missing or invalid") from None
            row = await bucket.complete(key, _text(call, "uploadId"), chosen)
            return _metadata(_object_json(row, None))
        if method == "abortMultipartUpload":
            await bucket.abort(key, _text(call, "uploadId"))
            return web.Response()
        raise invalid(f"unknown R2 method {method!r}")


def _ranged(
    offset: int | None, length: int | None, suffix: int | None, header: object, size: int
) -> tuple[int, int]:
    return byte_range(size, offset, length, suffix, header if isinstance(header, str) else None)


async def _value(request: web.Request) -> AsyncIterator[bytes]:
    async for chunk in request.content.iter_chunked(READ_CHUNK):
        yield chunk


def _call(header: str | None) -> dict[str, Any]:
    try:
        call = json.loads(header or "")
    except ValueError:
        call = None
    if not isinstance(call, dict):
        raise R2Refused(400, 10029, "Metadata missing or invalid")
    return call


def _text(call: dict[str, Any], key: str) -> str:
    value = call.get(key)
    if not isinstance(value, str):
        raise invalid("Metadata missing or invalid")
    return value


def _u64(value: object) -> int | None:
    if value is None:
        return None
    try:
        n = int(str(value))
    except ValueError:
        raise invalid("Metadata missing or invalid") from None
    return None if n == NONE_U64 else n


def _u32(value: object) -> int | None:
    n = _u64(value)
    return None if n == 2**32 - 1 else n


def _http(fields: object) -> dict[str, Any]:
    if not isinstance(fields, dict):
        return {}
    names = ("contentType", "contentLanguage", "contentDisposition", "contentEncoding")
    out: dict[str, Any] = {
        k: v for k in (*names, "cacheControl") if isinstance(v := fields.get(k), str)
    }
    expiry = _u64(fields.get("cacheExpiry"))
    if expiry is not None:
        out["cacheExpiry"] = expiry
    return out


def _custom(fields: object) -> dict[str, str]:
    if not isinstance(fields, list):
        return {}
    return {str(f.get("k")): str(f.get("v")) for f in fields if isinstance(f, dict)}


def _hashes(call: dict[str, Any]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    try:
        if isinstance(call.get("md5"), str):
            out["md5"] = base64.b64decode(call["md5"])
        for name in ("sha1", "sha256", "sha384", "sha512"):
            if isinstance(call.get(name), str):
                out[name] = bytes.fromhex(call[name])
    except (binascii.Error, ValueError):
        raise invalid("Metadata missing or invalid") from None
    return out


def _etags(value: object) -> tuple[Etag, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    return tuple(
        Etag(str(e.get("value", "")), str(e.get("type", "strong")))
        for e in value
        if isinstance(e, dict)
    )


def _conditional(value: object) -> Conditional | None:
    if not isinstance(value, dict):
        return None
    return Conditional(
        etag_matches=_etags(value.get("etagMatches")),
        etag_does_not_match=_etags(value.get("etagDoesNotMatch")),
        uploaded_before_ms=_u64(value.get("uploadedBefore")),
        uploaded_after_ms=_u64(value.get("uploadedAfter")),
        seconds=bool(value.get("secondsGranularity")),
    )


def _object_json(
    row: ObjectRow, rng: tuple[int, int] | None, http: bool = True, custom: bool = True
) -> dict[str, Any]:
    """An object's properties as workerd reads them (``R2HeadResponse``)."""
    checksums = {CHECKSUM_SLOTS[k]: v for k, v in json.loads(row.checksums).items()}
    if len(row.etag) == 32:  # a single put's etag is its MD5
        checksums["0"] = row.etag
    out: dict[str, Any] = {
        "name": row.key,
        "version": row.version,
        "size": row.size,
        "etag": row.etag,
        "uploaded": row.uploaded_ms,
        "checksums": checksums,
    }
    if http:
        out["httpFields"] = json.loads(row.http_metadata)
    if custom:
        out["customFields"] = [{"k": k, "v": v} for k, v in json.loads(row.custom_metadata).items()]
    if rng is not None:
        out["range"] = {"offset": rng[0], "length": rng[1]}
    return out


def _metadata(value: dict[str, Any], status: int = 200) -> web.Response:
    body = json.dumps(value).encode()
    return web.Response(
        status=status,
        body=body,
        headers={"cf-r2-metadata-size": str(len(body)), "Content-Type": "application/json"},
    )


@web.middleware
async def _answer_refusals(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except R2Refused as r:
        error = json.dumps({"version": 1, "v4code": r.v4code, "message": r.message})
        if isinstance(r.current, ObjectRow):
            response = _metadata(_object_json(r.current, (0, r.current.size)), r.status)
        else:
            response = web.Response(status=r.status)
        response.headers["cf-r2-error"] = error
        return response
