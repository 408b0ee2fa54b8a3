"""workerd's D1 protocol, served to workerd alone on a private unix socket.

A D1 binding in workerd is a wrapped binding: module ``cloudflare-internal:d1-api`` over a
``fetcher`` service, here an external service that injects ``X-Ocd-Worker``,
``X-Ocd-Binding`` and the start's secret (as for KV, ``ocd.js.kv``). The module speaks:

- ``POST /query?resultsFormat=ROWS_AND_COLUMNS`` (``first``, ``all``, ``raw``, ``batch``)
  and ``POST /execute?resultsFormat=NONE`` (``run``, ``exec``), the body one
  ``{"sql", "params"}`` or an array of them, run as one transaction;
- the answer: one result (or an array, for an array) ``{"success": true, "results",
  "meta"}``, or ``{"success": false, "error"}``, whose text the binding throws after
  ``D1_ERROR: ``.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from ocd.d1 import FORMATS, D1Service, result_json, statement
from ocd.errors import D1Error

BODY_BYTES = 100 * 1024 * 1024  # D1's own limit on a statement is far below this


class D1Endpoint:
    """``bindings``: (worker, binding) -> database id."""

    def __init__(
        self, d1: D1Service | None, secret: str, bindings: Mapping[tuple[str, str], str]
    ) -> None:
        self.d1 = d1
        self.secret = f"Bearer {secret}".encode()
        self.bindings = dict(bindings)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=BODY_BYTES)
        app.router.add_post("/query", self.handle)
        app.router.add_post("/execute", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self.secret):
            return web.Response(status=403, text="not allowed")
        key = (request.headers.get("X-Ocd-Worker", ""), request.headers.get("X-Ocd-Binding", ""))
        database_id = self.bindings.get(key)
        if database_id is None:
            return _failure(f"no D1 binding {key[1]} of worker {key[0]}")
        if self.d1 is None:  # check-config's trial start of workerd
            return _failure("ocd is only checking this config")
        fmt = request.query.get("resultsFormat", "ARRAY_OF_OBJECTS")
        if fmt not in FORMATS:
            fmt = "ARRAY_OF_OBJECTS"
        try:
            body: Any = json.loads(await request.read())
            many = isinstance(body, list)
            items = body if many else [body]
            if not all(isinstance(q, dict) for q in items):
                raise D1Error("Invalid request: expected {sql, params}")
            batch = [statement(q.get("sql"), q.get("params")) for q in items]
            outcomes = await self.d1.batch(database_id, batch)
        except ValueError:
            return _failure("Invalid request: the body is not JSON")
        except D1Error as e:
            return _failure(str(e))
        results = [result_json(o, fmt) for o in outcomes]
        return web.json_response(results if many else results[0])


def _failure(error: str) -> web.Response:
    return web.json_response({"success": False, "error": error}, status=500)
