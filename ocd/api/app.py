"""The API as an aiohttp sub-application, mounted at ``/client/v4`` on ocd's listener."""

from __future__ import annotations

from aiohttp import web

from ocd.api import openapi
from ocd.api.context import ApiContext
from ocd.api.envelope import envelope_middleware
from ocd.api.messages import MessageRoutes
from ocd.api.queues import QueueRoutes

PREFIX = "/client/v4"


def build_api(ctx: ApiContext) -> web.Application:
    app = web.Application(middlewares=[envelope_middleware])
    # Message routes first: routes are matched in order, and these carry the traffic.
    MessageRoutes(ctx).add_to(app.router)
    QueueRoutes(ctx).add_to(app.router)
    app.router.add_get("/openapi.json", openapi.handler)
    return app
