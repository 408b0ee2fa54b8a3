"""Cloudflare's JSON envelope, its error codes, and the middleware that keeps every error in
that shape: a user's mistake is a 4xx with a code, never a 500 or a stack trace."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

# Cloudflare's codes where one is known (reference 1.5, and the REST API's 10000 / 11xxx);
# the comments say where a code is ocd's own.
AUTH_ERROR = 10000
QUEUE_ID_MALFORMED = 10107
MESSAGE_METADATA_INVALID = 10203
BODY_INVALID = 10207
BODY_MALFORMED = 10208
QUEUE_DISABLED = 10252
INTERNAL = 15000
QUEUE_NOT_FOUND = 11000
CONSUMER_NOT_FOUND = 11002  # ocd's own
CONSUMER_EXISTS = 11004
QUEUE_IN_USE = 11006  # ocd's own: the config file names the queue
QUEUE_EXISTS = 11009  # ocd's own: the name is taken in this account
NO_PULL_CONSUMER = 11010  # ocd's own
ROUTE_NOT_FOUND = 7003
METHOD_NOT_ALLOWED = 7001


class ApiError(Exception):
    def __init__(self, status: int, code: int, message: str, pointer: str | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.pointer = pointer
        super().__init__(message)

    def response(self) -> web.Response:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.pointer:
            err["source"] = {"pointer": self.pointer}
        return web.json_response(
            {"success": False, "errors": [err], "messages": [], "result": None},
            status=self.status,
        )


def invalid(message: str, pointer: str | None = None) -> ApiError:
    return ApiError(400, BODY_INVALID, message, pointer)


def ok(
    result: Any,
    *,
    status: int = 200,
    messages: list[str] | None = None,
    result_info: dict[str, Any] | None = None,
) -> web.Response:
    body: dict[str, Any] = {
        "success": True,
        "errors": [],
        "messages": messages or [],
        "result": result,
    }
    if result_info is not None:
        body["result_info"] = result_info
    return web.json_response(body, status=status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


API_PREFIX = "/client/v4/"


@web.middleware
async def envelope_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith(API_PREFIX):
        return await handler(request)  # a worker's route: its responses are its own
    try:
        return await handler(request)
    except ApiError as e:
        return e.response()
    except web.HTTPRequestEntityTooLarge:
        return ApiError(413, BODY_INVALID, "request body is larger than 1 MiB").response()
    except web.HTTPNotFound:
        return ApiError(404, ROUTE_NOT_FOUND, "No route for that URI").response()
    except web.HTTPMethodNotAllowed:
        return ApiError(405, METHOD_NOT_ALLOWED, "Method not allowed for this route").response()
    except web.HTTPException as e:
        return ApiError(e.status, BODY_INVALID, e.reason).response()
    except Exception:
        log.exception(
            "API request %s %s failed",
            request.method,
            request.path,
            extra={"event": "api_failed"},
        )
        return ApiError(500, INTERNAL, "Unknown Internal Error").response()
