"""The SQS listener: AWS JSON 1.0 (``X-Amz-Target``, JSON in and out; errors with
``__type``, ``message`` and the ``x-amzn-query-error`` header, so botocore raises its
modelled classes) and the Query protocol (form ``Action=...`` in, XML out: ``query``),
chosen by ``Content-Type`` as AWS does: ``application/x-amz-json-*`` is JSON, anything
else (a form POST, or a GET with a query string) is Query.

Who sends a request is ``sigv4``'s business: without ``[[accounts]]`` any credentials, or
none, are account ``local`` (``000000000000``) and the listener is loopback only; with
them, every request must carry a valid SigV4 signature of an account's ``sqs_keys``.
Before either, ``ocd.http.browsers`` keeps web pages out (a foreign ``Host``, a cross-site
form or ``<img>``): AccessDenied.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from json.encoder import encode_basestring_ascii as _quoted  # json.dumps's own, in C
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from ocd.errors import OcdError, StoreError, StoreFull, StoreUnavailable
from ocd.http.body import BodyError, ClientGone, policy_of, read_body
from ocd.http.browsers import Guard
from ocd.http.sqs import query, shapes, sigv4
from ocd.http.sqs.actions import ACTIONS
from ocd.http.sqs.context import Call, SqsContext
from ocd.http.sqs.errors import CODES, SqsError, invalid
from ocd.http.sqs.message_actions import MAX_BATCH_BYTES, too_long
from ocd.http.sqs.queues import MAX_MESSAGE_BYTES

log = logging.getLogger(__name__)
JSON_TYPE = "application/x-amz-json-1.0"
XML_TYPE = "text/xml"
TARGET_PREFIX = "AmazonSQS."
DRAIN_FACTOR = 16  # a body over the limit is read and dropped up to this many limits
_ACTION = re.compile(rb"(?:^|&)Action=([A-Za-z]+)")


def request_id() -> str:
    """A random version-4 UUID for ``x-amzn-RequestId``: it names a request in logs and
    needs no secrecy, so from ``random`` rather than ``uuid.uuid4``'s os.urandom and UUID
    object (a third of the cost, on every request)."""
    h = f"{random.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_VARIANT = "89ab"  # RFC 4122's variant: the top two bits of that digit are 10


def _reply(
    status: int, body: dict[str, Any] | bytes, headers: dict[str, str] | None = None
) -> web.Response:
    h = {"x-amzn-RequestId": request_id()}
    h.update(headers or {})
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return web.Response(status=status, body=data, content_type=JSON_TYPE, headers=h)


_PLAIN_MESSAGE = ("MessageId", "ReceiptHandle", "MD5OfBody", "Body")


def encode(op: str, out: dict[str, Any]) -> bytes:
    """An action's reply as AWS JSON: ``json.dumps(out)``, byte for byte. A received
    message with no attributes (the common receive) comes from a template, at a third of
    what the encoder costs for it."""
    messages = out.get("Messages") if op == "ReceiveMessage" and len(out) == 1 else None
    if not messages:
        return json.dumps(out).encode()
    parts = []
    for m in messages:
        if tuple(m) == _PLAIN_MESSAGE:
            parts.append(
                f'{{"MessageId": {_quoted(m["MessageId"])}, '
                f'"ReceiptHandle": {_quoted(m["ReceiptHandle"])}, '
                f'"MD5OfBody": {_quoted(m["MD5OfBody"])}, "Body": {_quoted(m["Body"])}}}'
            )
        else:
            parts.append(json.dumps(m))
    return f'{{"Messages": [{", ".join(parts)}]}}'.encode()


# Errors the listener answers for a status alone (a malformed request, a route or method
# the endpoint does not have, the connection limit): status -> (shape, fault).
_STATUS_SHAPES = {
    404: ("com.amazon.coral.service#UnknownOperationException", "Sender"),
    405: ("com.amazon.coral.service#UnknownOperationException", "Sender"),
    408: ("com.amazon.coral.service#RequestTimeoutException", "Sender"),
    413: ("com.amazon.coral.service#RequestEntityTooLargeException", "Sender"),
    415: ("com.amazon.coral.service#UnsupportedMediaTypeException", "Sender"),
    503: ("com.amazon.coral.availability#ThrottlingException", "Receiver"),
}


def _status_shape(status: int) -> tuple[str, str]:
    return _STATUS_SHAPES.get(
        status,
        ("com.amazon.coral.service#InternalFailure", "Receiver")
        if status >= 500
        else ("com.amazon.coral.service#InvalidParameterValueException", "Sender"),
    )


def status_reply(status: int, message: str) -> web.Response:
    """An SQS-shaped error for ``status``: ``ocd.http.guard`` answers these too."""
    shape, fault = _status_shape(status)
    name = shape.rpartition("#")[2]
    return _reply(
        status,
        {"__type": shape, "message": message},
        {"x-amzn-query-error": f"{name};{fault}", "X-Amzn-Errortype": name},
    )


def is_json(request: web.BaseRequest) -> bool:
    """Whether a request speaks AWS JSON; anything else is the Query protocol."""
    return request.headers.get("Content-Type", "").startswith("application/x-amz-json")


def protocol_error(request: web.BaseRequest, status: int, message: str) -> web.Response:
    """``status_reply`` in the request's own protocol: the listener's answer to a request
    aiohttp could not parse or hand over (``ocd.http.guard``)."""
    if is_json(request):
        return status_reply(status, message)
    return _status_xml(status, message, request_id())


def error_reply(e: SqsError) -> web.Response:
    return _reply(
        e.status,
        {"__type": e.type_name, "message": e.message},
        {"x-amzn-query-error": f"{e.query_code};{e.fault}", "X-Amzn-Errortype": e.type_name},
    )


def _xml(status: int, body: str, request_id: str) -> web.Response:
    return web.Response(
        status=status,
        text=body,
        content_type=XML_TYPE,
        headers={"x-amzn-RequestId": request_id},
    )


def _invalid_action(op: str) -> SqsError:
    return SqsError("InvalidAction", f"The action {op} is not valid for this endpoint.")


class SqsApp:
    def __init__(self, ctx: SqsContext, guard: Guard | None = None) -> None:
        self.ctx = ctx
        self.guard = guard
        self._unsigned: sigv4.Caller | None = None  # see _caller

    def add_to(self, app: web.Application) -> None:
        for path in ("/", "/{account}/{queue}"):
            resource = app.router.add_resource(path)
            resource.add_route("POST", self.handle)
            resource.add_route("GET", self.handle)
            resource.add_route("*", _method_not_allowed)
        app.router.add_route("*", r"/{tail:[\s\S]*}", _not_found)

    async def handle(self, request: web.Request) -> web.Response:
        json_protocol = is_json(request)
        refused = self.guard.refusal(request) if self.guard is not None else None
        if refused is not None:
            e = SqsError("AccessDeniedException", refused)
            if json_protocol:
                return error_reply(e)
            rid = request_id()
            return _xml(e.status, query.error(e, rid), rid)
        try:
            return await (self._json(request) if json_protocol else self._query(request))
        except Exception:
            # a bug, not the sender's doing: logged with its traceback, answered in the
            # protocol's own envelope without it
            log.exception("sqs request failed", extra={"event": "sqs_internal_error"})
            err = SqsError("InternalFailure", "We encountered an internal error. Please try again.")
            if json_protocol:
                return error_reply(err)
            rid = request_id()
            return _xml(err.status, query.error(err, rid), rid)

    async def _json(self, request: web.Request) -> web.Response:
        target = request.headers.get("X-Amz-Target", "")
        op = target[len(TARGET_PREFIX) :] if target.startswith(TARGET_PREFIX) else ""
        if op not in ACTIONS:
            return error_reply(_invalid_action(op or target))
        try:
            raw = await _body(request, op)
        except _BodyRefused as e:
            return e.closing(status_reply(e.status, e.message))
        except _TooLarge as e:
            return _closing(error_reply(_too_large(op, request, e.message)), e.drained)
        try:
            caller = self._caller(request, raw)
        except SqsError as e:
            return error_reply(e)
        try:
            req = _json_object(raw)
            shapes.check(op, req, json=True)
            return _reply(200, encode(op, await self._run(op, req, request, caller)))
        except SqsError as e:
            return error_reply(e)

    async def _query(self, request: web.Request) -> web.Response:
        rid = request_id()
        try:
            raw = await _body(request, "query")
        except _BodyRefused as e:
            return e.closing(_status_xml(e.status, e.message, rid))
        except _TooLarge as e:
            m = _ACTION.search(e.head)
            op = request.query.get("Action") or (m.group(1).decode() if m else "")
            err = _too_large(op, request, e.message)
            return _closing(_xml(err.status, query.error(err, rid), rid), e.drained)
        try:
            caller = self._caller(request, raw)
            form = [(k, v) for k, v in request.query.items() if not k.startswith("X-Amz-")]
            if request.method == "POST" and raw:
                # the body as the limit-keeping reader inflated it, not aiohttp's own parse
                form += parse_qsl(raw.decode("utf-8", errors="replace"), keep_blank_values=True)
            params = dict(form)
            op = str(params.get("Action", ""))
            if op not in ACTIONS:
                raise _invalid_action(op or "(none)")
            req = query.decode(((k, str(v)) for k, v in form), op)
            shapes.check(op, req, json=False)
            if "QueueUrl" not in req and "queue" in request.match_info:
                base = f"{request.scheme}://{request.host}"
                req["QueueUrl"] = f"{base}{request.path}"  # posted to the queue's own URL
            out = await self._run(op, req, request, caller)
        except SqsError as e:
            return _xml(e.status, query.error(e, rid), rid)
        return _xml(200, query.reply(op, out, rid), rid)

    def _caller(self, request: web.Request, body: bytes) -> sigv4.Caller:
        if (
            self.ctx.verifier is None
            and "Authorization" not in request.headers
            and not request.rel_url.raw_query_string
        ):
            return self._unsigned_caller()
        headers: dict[str, list[str]] = {}
        for name, value in request.headers.items():
            headers.setdefault(name.lower(), []).append(value)
        signed = sigv4.Request(
            request.method,
            request.path,
            sigv4.decoded_query(request.rel_url.raw_query_string),
            headers,
            body,
        )
        verifier = self.ctx.verifier or sigv4.Verifier({}, False, self.ctx.region)
        return verifier.caller(signed, self.ctx.clock())

    def _unsigned_caller(self) -> sigv4.Caller:
        """Without accounts, a request with no signature (no Authorization header, no query
        string to carry one) is always the same caller: worked out once per region, not
        per request."""
        region = self.ctx.region
        found = self._unsigned
        if found is None or found.default_region != region:
            unsigned = sigv4.Request("POST", "/", (), {}, b"")
            found = sigv4.Verifier({}, False, region).caller(unsigned, self.ctx.clock())
            self._unsigned = found
        return found

    async def _run(
        self, op: str, req: dict[str, Any], request: web.Request, caller: sigv4.Caller
    ) -> dict[str, Any]:
        """Run an action; every failure comes out as an SqsError."""
        base = f"{request.scheme}://{request.host}"
        try:
            return await ACTIONS[op](self.ctx, Call(req, base, caller))
        except SqsError:
            raise
        except (StoreFull, StoreUnavailable) as e:  # the store says why; the daemon logs it once
            raise SqsError("ServiceUnavailable", str(e)) from None
        except StoreError as e:
            log.warning("sqs %s failed: %s", op, e, extra={"event": "sqs_store_error"})
            raise SqsError("InternalFailure", str(e)) from None
        except OcdError as e:
            raise SqsError("InvalidParameterValueException", str(e)) from None


class _BodyRefused(Exception):
    """The body could not be read within the listener's limits (``status``, ``message``);
    ``close``: whether the connection is past use (the body was not read to its end)."""

    def __init__(self, status: int, message: str, close: bool) -> None:
        self.status = status
        self.message = message
        self.close = close

    def closing(self, response: web.Response) -> web.Response:
        if self.close:
            response.force_close()
        return response


def _status_xml(status: int, message: str, rid: str) -> web.Response:
    """``status_reply``'s error, in the Query protocol's XML."""
    shape, fault = _status_shape(status)
    name = shape.rpartition("#")[2]
    code = CODES[name][0] if name in CODES else name  # the query code, where SQS has one
    return _xml(status, query.fault(fault, code, message, rid), rid)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")  # Python's json takes NaN; JSON does not


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _json_object(raw: bytes) -> dict[str, Any]:
    """The request's JSON object (an empty body is an empty one); SerializationException
    for anything else, as AWS answers a body its JSON reader cannot take."""
    if not raw:
        return {}
    try:
        req = _DECODER.decode(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's stack
        req = None
    if not isinstance(req, dict):
        raise SqsError("SerializationException", "The request body is not a JSON object.")
    return req


class _TooLarge(Exception):
    """The body is over the listener's limit: SQS answers that as a message too long, in
    its own envelope. ``head``: its first bytes, when the limit was known before reading
    (a Query request's ``Action`` is there); ``drained``: whether the rest was read, so
    the connection can be kept (closing on an unread body resets it under the client)."""

    def __init__(self, message: str, head: bytes, drained: bool) -> None:
        super().__init__(message)
        self.message = message
        self.head = head
        self.drained = drained


def _too_large(op: str, request: web.Request, message: str) -> SqsError:
    """SQS's error for a request body over the listener's limit. Such a body is over any
    queue's MaximumMessageSize, and is answered before its signature (and so its account
    and queue) can be checked, so the error names SQS's maximum."""
    if op == "SendMessageBatch":
        sent = request.content_length or MAX_BATCH_BYTES + 1
        return SqsError(
            "BatchRequestTooLong",
            f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent "
            f"{sent} bytes.",
        )
    if op in ("SendMessage", ""):
        return too_long(MAX_MESSAGE_BYTES)
    return invalid(f"The request is too large: {message}.")


def _closing(response: web.Response, drained: bool) -> web.Response:
    if not drained:
        response.force_close()
    return response


async def _drain(request: web.Request) -> tuple[bytes, bool]:
    """Read what is left of a body over the limit and drop it: (its first bytes, whether
    it ended within the body timeout and ``DRAIN_FACTOR`` limits)."""
    policy = policy_of(request)
    head = b""
    left = policy.limit * DRAIN_FACTOR
    try:
        async with asyncio.timeout(policy.timeout_s):
            while left > 0:
                chunk = await request.content.readany()
                if not chunk:
                    return head, True
                if len(head) < 4096:
                    head += chunk[: 4096 - len(head)]
                left -= len(chunk)
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, web.RequestPayloadError):
        pass
    return head, False


async def _body(request: web.Request, op: str) -> bytes:
    """The request body, inflated within the listener's limit (``ocd.http.body``)."""
    try:
        return await read_body(request)
    except BodyError as e:
        if e.status == 413:
            head, drained = await _drain(request)
            raise _TooLarge(e.message, head, drained) from None
        raise _BodyRefused(e.status, e.message, close=True) from None
    except ClientGone as e:
        log.info("sqs client went away mid-request: %s (%s)", op, e, extra={"event": "client_gone"})
        raise _BodyRefused(400, "request body incomplete", close=False) from None


async def _method_not_allowed(request: web.Request) -> web.Response:
    response = status_reply(
        405, f"{request.method} is not supported; SQS requests are POSTs (or Query GETs)"
    )
    response.headers["Allow"] = "GET, POST"
    return response


async def _not_found(request: web.Request) -> web.Response:
    return status_reply(404, f"no SQS resource at {request.path!r}; POST to / or a queue URL")
