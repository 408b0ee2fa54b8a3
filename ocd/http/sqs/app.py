"""The SQS listener: AWS JSON 1.0 (``X-Amz-Target``, JSON in and out; errors with
``__type``, ``message`` and the ``x-amzn-query-error`` header, so botocore raises its
modelled classes) and the Query protocol (form ``Action=...`` in, XML out: ``query``),
chosen by ``Content-Type`` as AWS does: ``application/x-amz-json-*`` is JSON, anything
else (a form POST, or a GET with a query string) is Query.

Who sends a request is ``sigv4``'s business: without ``[[accounts]]`` any credentials, or
none, are account ``local`` (``000000000000``) and the listener is loopback only; with
them, every request must carry a valid SigV4 signature of an account's ``sqs_keys``.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from aiohttp import web

from ocd.errors import OcdError, StoreError
from ocd.http.sqs import query, sigv4
from ocd.http.sqs.actions import ACTIONS
from ocd.http.sqs.context import Call, SqsContext
from ocd.http.sqs.errors import SqsError

log = logging.getLogger(__name__)
JSON_TYPE = "application/x-amz-json-1.0"
XML_TYPE = "text/xml"
TARGET_PREFIX = "AmazonSQS."


def _reply(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> web.Response:
    h = {"x-amzn-RequestId": str(uuid.uuid4())}
    h.update(headers or {})
    return web.Response(
        status=status, body=json.dumps(body).encode(), content_type=JSON_TYPE, headers=h
    )


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
    def __init__(self, ctx: SqsContext) -> None:
        self.ctx = ctx

    def add_to(self, app: web.Application) -> None:
        for path in ("/", "/{account}/{queue}"):
            app.router.add_post(path, self.handle)
            app.router.add_get(path, self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Content-Type", "").startswith("application/x-amz-json"):
            return await self._json(request)
        return await self._query(request)

    async def _json(self, request: web.Request) -> web.Response:
        target = request.headers.get("X-Amz-Target", "")
        op = target[len(TARGET_PREFIX) :] if target.startswith(TARGET_PREFIX) else ""
        if op not in ACTIONS:
            return error_reply(_invalid_action(op or target))
        raw = await request.read()
        try:
            caller = self._caller(request, raw)
        except SqsError as e:
            return error_reply(e)
        try:
            req = json.loads(raw) if raw else {}
            if not isinstance(req, dict):
                raise ValueError
        except ValueError:
            return error_reply(
                SqsError("InvalidParameterValueException", "The request body is not a JSON object.")
            )
        try:
            return _reply(200, await self._run(op, req, request, caller))
        except SqsError as e:
            return error_reply(e)

    async def _query(self, request: web.Request) -> web.Response:
        request_id = str(uuid.uuid4())
        try:
            raw = await request.read()
            caller = self._caller(request, raw)
            form = [(k, v) for k, v in request.query.items() if not k.startswith("X-Amz-")]
            if request.method == "POST":
                form += list((await request.post()).items())  # type: ignore[arg-type]
            params = dict(form)
            op = str(params.get("Action", ""))
            if op not in ACTIONS:
                raise _invalid_action(op or "(none)")
            req = query.decode(((k, str(v)) for k, v in form), op)
            if "QueueUrl" not in req and "queue" in request.match_info:
                base = f"{request.scheme}://{request.host}"
                req["QueueUrl"] = f"{base}{request.path}"  # posted to the queue's own URL
            out = await self._run(op, req, request, caller)
        except SqsError as e:
            return _xml(e.status, query.error(e, request_id), request_id)
        return _xml(200, query.reply(op, out, request_id), request_id)

    def _caller(self, request: web.Request, body: bytes) -> sigv4.Caller:
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

    async def _run(
        self, op: str, req: dict[str, Any], request: web.Request, caller: sigv4.Caller
    ) -> dict[str, Any]:
        """Run an action; every failure comes out as an SqsError."""
        base = f"{request.scheme}://{request.host}"
        try:
            return await ACTIONS[op](self.ctx, Call(req, base, caller))
        except SqsError:
            raise
        except StoreError as e:
            log.warning("sqs %s failed: %s", op, e, extra={"event": "sqs_store_error"})
            raise SqsError("InternalFailure", str(e)) from None
        except OcdError as e:
            raise SqsError("InvalidParameterValueException", str(e)) from None
