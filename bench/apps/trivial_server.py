"""The yardstick for ocd's HTTP push: the least an aiohttp JSON endpoint can do.

    python trivial_server.py PORT

Serves ``POST`` on the same path as ocd's push (read the JSON body, answer a small JSON
envelope) and ``GET /healthz``, on 127.0.0.1, with uvloop and no access log, as ``ocd serve``
runs. ``bench/run.py`` drives it with the same load generator and requests as ocd's single
push, so that ``http_push_single_ratio`` is ocd's cost over a handler that does nothing.
"""

import sys

import uvloop
from aiohttp import web

PUSH = "/client/v4/accounts/{account_id}/queues/{queue_id}/messages"


async def push(request: web.Request) -> web.Response:
    data = await request.json()
    return web.json_response(
        {"success": True, "errors": [], "messages": [], "result": {"keys": len(data)}}
    )


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def main() -> None:
    app = web.Application()
    app.router.add_post(PUSH, push)
    app.router.add_get("/healthz", healthz)
    web.run_app(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        access_log=None,
        print=None,
        loop=uvloop.new_event_loop(),
    )


if __name__ == "__main__":
    main()
