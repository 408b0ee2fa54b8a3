"""The OpenAPI 3 document of everything ocd serves under /client/v4."""

from __future__ import annotations

from typing import Any

from aiohttp import web


def document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "ocd Queues API", "version": "0.1.0"},
        "paths": {},
    }


async def handler(request: web.Request) -> web.Response:
    return web.json_response(document())
