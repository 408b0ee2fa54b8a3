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
from ocd.http.sqs.actions import ACTIONS
from ocd.http.sqs.context import Call, SqsContext
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


def error_reply(e: SqsError) -> web.Response:
    return _reply(
        e.status,
        {"__type": e.type_name, "message": e.message},
        {"x-amzn-query-error": f"{e.query_code};Sender", "X-Amzn-Errortype": e.type_name},
    )


class SqsApp:
    def __init__(self, ctx: SqsContext) -> None:
        self.ctx = ctx

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/", self.handle)
        app.router.add_post("/{account}/{queue}", self.handle)

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
        action = ACTIONS.get(op)
        if action is None:
            return error_reply(
                SqsError(
                    "InvalidAction", f"The action {op or target} is not valid for this endpoint."
                )
            )
        try:
            raw = await request.read()
            req = json.loads(raw) if raw else {}
            if not isinstance(req, dict):
                raise ValueError
        except ValueError:
            return error_reply(
                SqsError("InvalidParameterValueException", "The request body is not a JSON object.")
            )
        base = f"{request.scheme}://{request.host}"
        try:
            out = await action(self.ctx, Call(req, base))
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
