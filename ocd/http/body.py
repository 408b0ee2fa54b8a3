"""Reading a request body: within a time limit, inflated here (not in aiohttp's parser), and
with the size limit applied to what it inflates to.

The listeners run with aiohttp's ``auto_decompress`` off, so nothing is inflated before a
handler asks for the body, which it does after checking the caller's token: a tokenless
request is refused without its body being read at all. Inflating is incremental and stops
one byte past the limit, so a small body that would inflate to a gibibyte costs at most
``limit`` bytes of work before its 413, and the event loop never stalls on it.

Each surface turns a :class:`BodyError` into its own error shape (Cloudflare's envelope,
SQS's JSON, plain text on worker routes).
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from dataclasses import dataclass

from aiohttp import web

MIB = 1024 * 1024
_ALREADY_HERE = contextlib.nullcontext()
SUPPORTED = ("gzip", "x-gzip", "deflate", "identity")


@dataclass(frozen=True, slots=True)
class BodyPolicy:
    limit: int = MIB  # bytes, after inflating
    timeout_s: float = 30.0  # the whole body must arrive within this


BODY_POLICY = web.AppKey("ocd_body_policy", BodyPolicy)


class BodyError(Exception):
    """A body ocd will not read: too large, too slow, undecodable or in an unknown coding."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ClientGone(Exception):
    """The client closed the connection before its body was complete."""


def policy_of(request: web.Request) -> BodyPolicy:
    return request.config_dict.get(BODY_POLICY) or BodyPolicy()


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"


class _Inflater:
    """gzip (several members too) or deflate (zlib-wrapped or raw), ``limit`` bytes at most."""

    def __init__(self, coding: str, limit: int) -> None:
        self.coding = coding
        self.limit = limit
        self.out = 0
        self._d: zlib._Decompress | None = None
        self._pending = b""  # deflate: the first bytes, until the header can be told

    def _start(self, data: bytes) -> zlib._Decompress:
        if self.coding == "deflate":
            # RFC 9110 says zlib-wrapped; some clients send raw deflate. The zlib header is
            # two bytes: method 8 in the low nibble, and a multiple of 31 together.
            wrapped = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        if self._d is None:
            data = self._pending + data
            if self.coding == "deflate" and len(data) < 2:
                self._pending = data
                return out
            self._pending = b""
            self._d = self._start(data)
        while data:
            d = self._d
            chunk = d.decompress(data, self.limit + 1 - self.out)
            self.out += len(chunk)
            if chunk:
                out.append(chunk)
            if self.out > self.limit:
                raise BodyError(
                    413, f"request body inflates to more than {_size(self.limit)}, the limit"
                )
            if d.unconsumed_tail:  # stopped at max_length: room left, go on
                data = d.unconsumed_tail
                continue
            if d.eof and d.unused_data:
                if self.coding == "deflate" or d.unused_data[:2] != b"\x1f\x8b":
                    raise BodyError(400, f"request body has data after its {self.coding} stream")
                data = d.unused_data  # the next gzip member
                self._d = self._start(data)
                continue
            data = b""
        return out

    def finish(self) -> None:
        if self._d is None and not self._pending:
            return  # an empty body
        if self._d is None or not self._d.eof:
            raise BodyError(400, f"request body is not valid {self.coding}: it ends early")


def codings(request: web.Request) -> list[str]:
    """The body's content codings, in the order applied; raises 415 for any ocd cannot
    undo (only one coding besides identity is supported)."""
    header = request.headers.get("Content-Encoding", "")
    found = [c.strip().lower() for c in header.split(",") if c.strip()]
    found = [c for c in found if c != "identity"]
    unknown = [c for c in found if c not in SUPPORTED]
    if unknown or len(found) > 1:
        raise BodyError(
            415,
            f"Content-Encoding {header.strip()!r} is not supported; send the body "
            "uncompressed, or with one of gzip or deflate",
        )
    return found


async def read_body(request: web.Request, policy: BodyPolicy | None = None) -> bytes:
    """The request's body, inflated; BodyError or ClientGone when it cannot be had."""
    policy = policy or policy_of(request)
    coding = codings(request)
    limit = policy.limit
    length = request.content_length
    if not coding and length is not None and length > limit:
        raise BodyError(413, f"request body is larger than {_size(limit)}, the limit")
    inflater = _Inflater(coding[0], limit) if coding else None
    parts: list[bytes] = []
    raw = 0
    # A small body is usually all there by now: reading it cannot wait, so no timer is armed
    # (arming and cancelling one costs as much as the read).
    arrived = request.content.is_eof()
    try:
        async with _ALREADY_HERE if arrived else asyncio.timeout(policy.timeout_s):
            while True:
                chunk = await request.content.readany()
                if not chunk:
                    break
                raw += len(chunk)
                if raw > limit:  # compressed, and still more than the limit
                    raise BodyError(413, f"request body is larger than {_size(limit)}, the limit")
                if inflater is None:
                    parts.append(chunk)
                    continue
                try:
                    parts += inflater.feed(chunk)
                except zlib.error as e:
                    raise BodyError(
                        400, f"request body is not valid {inflater.coding}: {e}"
                    ) from None
    except TimeoutError:
        raise BodyError(
            408,
            f"request body not received within {policy.timeout_s:g} s (server.body_timeout)",
        ) from None
    except (ConnectionError, asyncio.IncompleteReadError) as e:
        raise ClientGone(str(e) or type(e).__name__) from None
    except web.RequestPayloadError as e:
        if request.transport is None or request.transport.is_closing():
            raise ClientGone(str(e)) from None
        raise BodyError(400, f"request body cannot be read: {e}") from None
    if inflater is not None:
        inflater.finish()
    return b"".join(parts)
