"""Cloudflare's JSON envelope, its error codes, and the middleware that keeps every error in
that shape: a user's mistake is a 4xx with a code, never a 500 or a stack trace."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ocd.errors import QueueNotFound, StoreFull, StoreUnavailable
from ocd.http.body import BodyError, ClientGone
from ocd.http.browsers import Guard
from ocd.limits import (  # the codes, from the one table; re-exported for the handlers
    AUTH_ERROR,
    BODY_INVALID,
    BODY_MALFORMED,
    CONSUMER_EXISTS,
    CONSUMER_NOT_FOUND,
    FEATURE_NOT_SUPPORTED,
    INTERNAL,
    INVALID_TOKEN,
    MESSAGE_METADATA_INVALID,
    METHOD_NOT_ALLOWED,
    NO_PULL_CONSUMER,
    OVERLOADED,
    QUEUE_DISABLED,
    QUEUE_EXISTS,
    QUEUE_ID_MALFORMED,
    QUEUE_IN_USE,
    QUEUE_NOT_FOUND,
    ROUTE_NOT_FOUND,
    SERVICE_NOT_FOUND,
    STORAGE_FULL,
    STORE_UNAVAILABLE,
    TASK_NOT_FOUND,
    TASK_RUNNING,
    USER_UNAUTHORIZED,
)

log = logging.getLogger(__name__)

__all__ = [
    "AUTH_ERROR",
    "BODY_INVALID",
    "BODY_MALFORMED",
    "CONSUMER_EXISTS",
    "CONSUMER_NOT_FOUND",
    "FEATURE_NOT_SUPPORTED",
    "INTERNAL",
    "INVALID_TOKEN",
    "MESSAGE_METADATA_INVALID",
    "METHOD_NOT_ALLOWED",
    "NO_PULL_CONSUMER",
    "OVERLOADED",
    "QUEUE_DISABLED",
    "QUEUE_EXISTS",
    "QUEUE_ID_MALFORMED",
    "QUEUE_IN_USE",
    "QUEUE_NOT_FOUND",
    "ROUTE_NOT_FOUND",
    "SERVICE_NOT_FOUND",
    "STORAGE_FULL",
    "STORE_UNAVAILABLE",
    "TASK_NOT_FOUND",
    "TASK_RUNNING",
    "USER_UNAUTHORIZED",
]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        pointer: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.pointer = pointer
        self.headers = headers or {}
        super().__init__(message)

    def response(self) -> web.Response:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.pointer:
            err["source"] = {"pointer": self.pointer}
        return web.json_response(
            {"success": False, "errors": [err], "messages": [], "result": None},
            status=self.status,
            headers=self.headers,
        )


def error_response(status: int, message: str) -> web.Response:
    """An error in the envelope for a status alone: what the listener answers before (or
    instead of) a route, e.g. a malformed request or the connection limit."""
    if status == 404:
        code = ROUTE_NOT_FOUND
    elif status == 405:
        code = METHOD_NOT_ALLOWED
    elif status == 413:
        code = BODY_INVALID
    elif status == 503:
        code = OVERLOADED
    elif status >= 500:
        code = INTERNAL
    else:
        code = BODY_MALFORMED
    return ApiError(status, code, message).response()


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


def enveloped(handler: Handler, guard: Guard | None = None) -> Handler:
    """``handler`` with every error it raises answered in the envelope, behind ``guard``
    (``ocd.http.browsers``: no web page may drive the API).

    A wrapper per API route rather than an application middleware: a middleware runs for
    every request, the workers' included, and adds two coroutine layers to each."""

    async def handle(request: web.Request) -> web.StreamResponse:
        if guard is not None:
            refused = guard.refusal(request)
            if refused is not None:
                return ApiError(403, AUTH_ERROR, refused).response()
        try:
            return await handler(request)
        except ApiError as e:
            return e.response()
        except BodyError as e:
            response = error_response(e.status, e.message)
            response.force_close()  # what is left of the body is not worth reading
            return response
        except ClientGone as e:
            log.info(
                "client went away mid-request: %s %s (%s)",
                request.method,
                request.path,
                e,
                extra={"event": "client_gone"},
            )
            return error_response(400, "request body incomplete")  # nobody reads it
        except web.HTTPRequestEntityTooLarge:
            return ApiError(413, BODY_INVALID, "request body is larger than 1 MiB").response()
        except web.HTTPNotFound:
            return ApiError(404, ROUTE_NOT_FOUND, "No route for that URI").response()
        except web.HTTPMethodNotAllowed as e:
            allow = {"Allow": e.headers["Allow"]} if "Allow" in e.headers else None
            return ApiError(
                405, METHOD_NOT_ALLOWED, "Method not allowed for this route", headers=allow
            ).response()
        except web.HTTPException as e:
            return ApiError(e.status, BODY_INVALID, e.reason).response()
        except QueueNotFound as e:  # deleted meanwhile, perhaps on another node
            return ApiError(404, QUEUE_NOT_FOUND, f"Queue not found: {e.queue}").response()
        except StoreUnavailable as e:
            # Not logged here, once per request: the store logs the outage once.
            where = f" ({e.where})" if e.where else ""
            response = ApiError(
                503,
                STORE_UNAVAILABLE,
                f"the queue database{where} is unavailable; try again shortly",
            ).response()
            response.headers["Retry-After"] = "1"
            return response
        except StoreFull as e:  # the message says the disk is full and where
            response = ApiError(507, STORAGE_FULL, str(e)).response()
            response.headers["Retry-After"] = "5"
            return response
        except Exception:
            log.exception(
                "API request %s %s failed",
                request.method,
                request.path,
                extra={"event": "api_failed"},
            )
            return ApiError(500, INTERNAL, "Unknown Internal Error").response()

    return handle


class ApiRouter:
    """Adds routes to the application's router with their handlers ``enveloped`` behind
    one guard."""

    def __init__(self, router: web.UrlDispatcher, guard: Guard | None = None) -> None:
        self._router = router
        self.guard = guard
        self.resources: list[web.Resource] = []

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        route = self._router.add_route(method, path, enveloped(handler, self.guard))
        assert isinstance(route.resource, web.Resource)
        if route.resource not in self.resources:
            self.resources.append(route.resource)

    def add_get(self, path: str, handler: Handler) -> None:
        self.add_route("GET", path, handler)
        self.add_route("HEAD", path, handler)  # as aiohttp's own add_get does

    def add_post(self, path: str, handler: Handler) -> None:
        self.add_route("POST", path, handler)

    def add_put(self, path: str, handler: Handler) -> None:
        self.add_route("PUT", path, handler)

    def add_patch(self, path: str, handler: Handler) -> None:
        self.add_route("PATCH", path, handler)

    def add_delete(self, path: str, handler: Handler) -> None:
        self.add_route("DELETE", path, handler)
