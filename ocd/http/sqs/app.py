"""The SQS listener: AWS JSON 1.0 requests in, JSON replies out (errors with ``__type``,
``message`` and the ``x-amzn-query-error`` header, so botocore raises its modelled classes).

Any credentials, or none, are accepted: the listener is loopback only (``[sqs] listen``)
and every queue lives in account ``local``, shown as ``000000000000``.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from aiohttp import web

from ocd.errors import OcdError, StoreError
from ocd.http.body import BodyError, ClientGone, read_body
from ocd.http.sqs.actions import ACTION_NAMES, Actions, SqsContext
from ocd.http.sqs.errors import SqsError

log = logging.getLogger(__name__)
JSON_TYPE = "application/x-amz-json-1.0"
TARGET_PREFIX = "AmazonSQS."


def _reply(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> web.Response:
    h = {"x-amzn-RequestId": str(uuid.uuid4())}
    h.update(headers or {})
    return web.Response(
        status=status, body=json.dumps(body).encode(), content_type=JSON_TYPE, headers=h
    )


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


def status_reply(status: int, message: str) -> web.Response:
    """An SQS-shaped error for ``status``: ``ocd.http.guard`` answers these too."""
    shape, fault = _STATUS_SHAPES.get(
        status,
        ("com.amazon.coral.service#InternalFailure", "Receiver")
        if status >= 500
        else ("com.amazon.coral.service#InvalidParameterValueException", "Sender"),
    )
    name = shape.rpartition("#")[2]
    return _reply(
        status,
        {"__type": shape, "message": message},
        {"x-amzn-query-error": f"{name};{fault}", "X-Amzn-Errortype": name},
    )


def error_reply(e: SqsError) -> web.Response:
    return _reply(
        e.status,
        {"__type": e.type_name, "message": e.message},
        {"x-amzn-query-error": f"{e.query_code};Sender", "X-Amzn-Errortype": e.type_name},
    )


class SqsApp:
    def __init__(self, ctx: SqsContext) -> None:
        self.actions = Actions(ctx)

    def add_to(self, app: web.Application) -> None:
        for path in ("/", "/{account}/{queue}"):
            resource = app.router.add_resource(path)
            resource.add_route("POST", self.handle)
            resource.add_route("*", _method_not_allowed)
        app.router.add_route("*", r"/{tail:[\s\S]*}", _not_found)

    async def handle(self, request: web.Request) -> web.Response:
        ctype = request.headers.get("Content-Type", "")
        if not ctype.startswith("application/x-amz-json"):
            return error_reply(
                SqsError(
                    "InvalidAction",
                    "ocd speaks the AWS JSON 1.0 protocol (Content-Type "
                    "application/x-amz-json-1.0); the query protocol is not supported yet.",
                )
            )
        target = request.headers.get("X-Amz-Target", "")
        op = target[len(TARGET_PREFIX) :] if target.startswith(TARGET_PREFIX) else ""
        if op not in ACTION_NAMES:
            return error_reply(
                SqsError(
                    "InvalidAction", f"The action {op or target} is not valid for this endpoint."
                )
            )
        try:
            raw = await read_body(request)
        except BodyError as e:
            response = status_reply(e.status, e.message)
            response.force_close()
            return response
        except ClientGone as e:
            log.info(
                "sqs client went away mid-request: %s (%s)",
                op,
                e,
                extra={"event": "client_gone"},
            )
            return status_reply(400, "request body incomplete")
        try:
            req = json.loads(raw) if raw else {}
            if not isinstance(req, dict):
                raise ValueError
        except ValueError:
            return error_reply(
                SqsError("InvalidParameterValueException", "The request body is not a JSON object.")
            )
        base = f"{request.scheme}://{request.host}"
        try:
            out = await getattr(self.actions, op)(req, base)
        except SqsError as e:
            return error_reply(e)
        except StoreError as e:
            log.warning("sqs %s failed: %s", op, e, extra={"event": "sqs_store_error"})
            return _reply(
                500,
                {"__type": "com.amazonaws.sqs#InternalFailure", "message": str(e)},
                {"x-amzn-query-error": "InternalFailure;Receiver"},
            )
        except OcdError as e:
            return error_reply(SqsError("InvalidParameterValueException", str(e)))
        return _reply(200, out)


async def _method_not_allowed(request: web.Request) -> web.Response:
    response = status_reply(405, f"{request.method} is not supported; SQS requests are POSTs")
    response.headers["Allow"] = "POST"
    return response


async def _not_found(request: web.Request) -> web.Response:
    return status_reply(404, f"no SQS resource at {request.path!r}; POST to / or a queue URL")
