"""A request to a JS worker's route, passed to workerd as it was received, and its answer
passed back as it comes.

Method, target, headers (hop-by-hop ones excepted) and the body's bytes go on unchanged:
nothing inflated, nothing added (aiohttp's client would add ``Accept-Encoding``,
``Content-Type``, ``User-Agent``, ``Accept``). Bodies stream both ways, so a route can answer
with server-sent events and a large upload is not held in ocd's memory; the request body's
size limit is Cloudflare's (``limits.WORKER_REQUEST_BYTES``), and the body timeout applies to
each pause in it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from ocd import limits
from ocd.http.body import policy_of

log = logging.getLogger(__name__)

_HOP = frozenset(
    ("connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection", "te",
     "trailer", "proxy-authenticate", "proxy-authorization")
)  # fmt: skip
_AUTO = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")


class _TooLarge(Exception):
    pass


class _Slow(Exception):
    pass


class Upload:
    """The request's body as it arrives; remembers why it stopped early, if it did."""

    def __init__(self, request: web.Request, limit: int, pause_s: float) -> None:
        self.request = request
        self.limit = limit
        self.pause_s = pause_s
        self.error: Exception | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        sent = 0
        while True:
            try:
                async with asyncio.timeout(self.pause_s):
                    chunk = await self.request.content.readany()
            except TimeoutError:
                self.error = _Slow()
                raise self.error from None
            if not chunk:
                return
            sent += len(chunk)
            if sent > self.limit:
                self.error = _TooLarge()
                raise self.error
            yield chunk


async def forward(
    session: aiohttp.ClientSession, worker: str, request: web.Request
) -> web.StreamResponse:
    """``request`` to workerd through ``session`` (its worker's socket), streamed."""
    limit = limits.WORKER_REQUEST_BYTES
    length = request.content_length
    if length is not None and length > limit:
        return _refuse(413, f"request body is larger than {limit // (1024 * 1024)} MiB, the limit")
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
    upload = Upload(request, limit, policy_of(request).timeout_s)
    data = upload.chunks() if request.body_exists else None
    url = f"http://{request.host}{request.rel_url}"
    response: web.StreamResponse | None = None
    try:
        async with session.request(
            request.method,
            url,
            headers=headers,
            data=data,
            allow_redirects=False,
            skip_auto_headers=_AUTO,
            compress=None,
        ) as r:
            response = web.StreamResponse(status=r.status, reason=r.reason)
            for k, v in r.headers.items():
                if k.lower() not in _HOP:
                    response.headers.add(k, v)
            await response.prepare(request)
            async for chunk in r.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response
    except (aiohttp.ClientError, TimeoutError, _TooLarge, _Slow) as e:
        if response is not None:  # mid-answer: all that can be done is to stop
            log.info(
                "worker %s: the answer to %s %s was cut short: %s",
                worker,
                request.method,
                request.path,
                e,
                extra={"event": "fetch_cut", "worker": worker},
            )
            if request.transport is not None:
                request.transport.close()
            return response
        if isinstance(upload.error, _TooLarge):
            return _refuse(
                413, f"request body is larger than {limit // (1024 * 1024)} MiB, the limit"
            )
        if isinstance(upload.error, _Slow):
            return _refuse(408, f"request body paused for more than {upload.pause_s:g} s")
        log.warning(
            "worker %s: workerd did not answer %s %s: %s",
            worker,
            request.method,
            request.path,
            e,
            extra={"event": "fetch_failed", "worker": worker},
        )
        return web.Response(status=502, text="the JavaScript worker did not answer\n")


def _refuse(status: int, text: str) -> web.Response:
    response = web.Response(status=status, text=text + "\n")
    response.force_close()  # the rest of the body is not read
    return response
