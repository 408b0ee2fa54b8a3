"""The API's routes on ocd's listener, under ``/client/v4``.

They are registered on the main application, not a mounted sub-application: a sub-app adds
a second routing pass to every request, a cost single-message pushes feel (figures in
docs/performance.md). Each API handler is wrapped to answer errors in the envelope (worker
routes are left alone), and every API path answers an unknown method with a 405 in the
envelope instead of falling through to the worker routes.
"""

from __future__ import annotations

from aiohttp import web

from ocd.http.browsers import Guard
from ocd.http.cloudflare import openapi
from ocd.http.cloudflare.browse import BrowseRoutes
from ocd.http.cloudflare.context import ApiContext
from ocd.http.cloudflare.envelope import ApiRouter, Handler, enveloped
from ocd.http.cloudflare.messages import MessageRoutes
from ocd.http.cloudflare.queues import QueueRoutes
from ocd.http.cloudflare.user import UserRoutes

PREFIX = "/client/v4"


def add_api(app: web.Application, ctx: ApiContext, guard: Guard | None = None) -> None:
    router = ApiRouter(app.router, guard)
    # Message routes first: routes are matched in order, and these carry the traffic.
    MessageRoutes(ctx).add_to(router, PREFIX)
    QueueRoutes(ctx).add_to(router, PREFIX)
    UserRoutes(ctx).add_to(router, PREFIX)
    BrowseRoutes(ctx).add_to(router, PREFIX)
    router.add_get(PREFIX + "/openapi.json", openapi.handler)
    for resource in router.resources:
        allowed = sorted({route.method for route in resource if route.method != "*"})
        resource.add_route("*", enveloped(_method_not_allowed(allowed), guard))
    # Anything else under the prefix is an API 404, not a request for a worker; [\s\S]
    # rather than ".", which would let a path holding a newline (%0A) fall through.
    router.add_route("*", PREFIX + r"/{tail:[\s\S]*}", _not_found)


def _method_not_allowed(allowed: list[str]) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        raise web.HTTPMethodNotAllowed(request.method, allowed)  # with its Allow header

    return handle


async def _not_found(request: web.Request) -> web.StreamResponse:
    raise web.HTTPNotFound()
