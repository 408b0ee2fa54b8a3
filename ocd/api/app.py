"""The API's routes on ocd's listener, under ``/client/v4``.

They are registered on the main application, not a mounted sub-application: a sub-app adds
a second routing pass to every request, which cost single-message pushes a tenth of their
throughput. The envelope middleware only touches requests under the prefix, and every API
path answers an unknown method with a 405 in the envelope instead of falling through to the
worker routes.
"""

from __future__ import annotations

from aiohttp import web

from ocd.api import openapi
from ocd.api.context import ApiContext
from ocd.api.messages import MessageRoutes
from ocd.api.queues import QueueRoutes

PREFIX = "/client/v4"


def add_api(app: web.Application, ctx: ApiContext) -> None:
    router = app.router
    before = set(router.resources())
    # Message routes first: routes are matched in order, and these carry the traffic.
    MessageRoutes(ctx).add_to(router, PREFIX)
    QueueRoutes(ctx).add_to(router, PREFIX)
    router.add_get(PREFIX + "/openapi.json", openapi.handler)
    for resource in [r for r in router.resources() if r not in before]:
        assert isinstance(resource, web.Resource)
        resource.add_route("*", _method_not_allowed)
    # Anything else under the prefix is an API 404, not a request for a worker.
    router.add_route("*", PREFIX + "/{tail:.*}", _not_found)


async def _method_not_allowed(request: web.Request) -> web.StreamResponse:
    raise web.HTTPMethodNotAllowed(request.method, [])


async def _not_found(request: web.Request) -> web.StreamResponse:
    raise web.HTTPNotFound()
