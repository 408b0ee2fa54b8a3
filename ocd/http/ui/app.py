"""The dashboard's routes under ``/__ocd/ui``: server-rendered pages (Jinja2, autoescaped)
that work without JavaScript, forms that POST and redirect back, one SSE stream per tab.

Every action calls the domain operations the REST API calls (``ocd.producer`` to send,
``ocd.admin`` to pause, purge and move, the store's read operations to browse); no SQL.
Links and assets are built from ``[ui] base_path``, so the UI works behind a rewriting proxy.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from functools import partial
from importlib import resources
from typing import Any, NoReturn

from aiohttp import web

from ocd.http.browsers import Guard, same_origin
from ocd.http.ui import actions
from ocd.http.ui.auth import COOKIE, SAFE_METHODS, Gate, Viewer
from ocd.http.ui.live import Hub, stream
from ocd.http.ui.source import UiSource
from ocd.http.ui.views import browse_params, environment, message_view, queue_rows, sparkline
from ocd.store import QueueRecord, SearchQuery

log = logging.getLogger(__name__)

MOUNT = "/__ocd/ui"  # where the daemon serves it; base_path is where browsers see it
FULL_BODY_BYTES = 65_536
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}

Handler = Callable[[web.Request, Viewer], Awaitable[web.StreamResponse]]


def see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})


class Dashboard:
    def __init__(self, source: UiSource, base_path: str | None = None) -> None:
        self.source = source
        self.base = (base_path or source.config.ui.base_path).rstrip("/")
        self.env = environment()
        self.hub = Hub(source)
        self.gate: Gate | None = None
        # Pages show message bodies: a rebound name may not read them off an open daemon.
        self.guard = Guard(source.config.server.host, lambda: not self.source.config.accounts)
        self._static = {
            f.name: f.read_bytes()
            for f in resources.files("ocd.http.ui").joinpath("static").iterdir()
            if f.is_file()
        }
        self._version = str(abs(hash(tuple(sorted(self._static.items())))) % 10**8)

    async def open(self) -> None:
        """Read the session key (kept in the database, the same for every node)."""
        key = await self.source.store.secret("ui-session")
        cookie_path = self.base.rsplit("/", 1)[0] + "/" if "/" in self.base[1:] else "/"
        self.gate = Gate(
            self.source.config.accounts,
            self.source.config.ui.read_only,
            key,
            cookie_path,
            self.source.clock,
        )

    def reconfigure(self) -> None:
        """After a reload: accounts and read-only may have changed."""
        if self.gate is not None:
            cfg = self.source.config
            self.gate.configure(cfg.accounts, cfg.ui.read_only)

    def add_to(self, router: web.UrlDispatcher) -> None:
        r = router
        r.add_get(MOUNT, self._to_root)
        r.add_get(MOUNT + "/", self._page(self.queues))
        r.add_get(MOUNT + "/static/{name}", self.static)
        r.add_get(MOUNT + "/login", self.login_form)
        r.add_post(MOUNT + "/login", self.login)
        r.add_post(MOUNT + "/logout", self._page(self.logout))
        r.add_get(MOUNT + "/events", self._page(self.events))
        r.add_get(MOUNT + "/live-stats", self._page(self.live_stats))
        r.add_get(MOUNT + "/consumers", self._page(self.consumers))
        r.add_get(MOUNT + "/workers", self._page(self.workers))
        r.add_post(MOUNT + "/workers/reload", self._action(actions.reload))
        r.add_get(MOUNT + "/tasks/{task_id}", self._page(self.task))
        r.add_post(MOUNT + "/tasks/{task_id}/cancel", self._action(actions.cancel))
        q = MOUNT + "/queues/{name}"
        r.add_get(q, self._page(self.queue))
        r.add_get(q + "/messages/{seq:[0-9]{1,18}}", self._page(self.message))
        r.add_get(q + "/messages/{seq:[0-9]{1,18}}/body", self._page(self.download))
        r.add_post(q + "/send", self._action(actions.send))
        r.add_post(q + "/pause", self._action(actions.pause))
        r.add_post(q + "/resume", self._action(actions.resume))
        r.add_post(q + "/purge", self._action(actions.purge))
        r.add_post(q + "/move", self._action(actions.move))
        r.add_route("*", MOUNT + "/{tail:.*}", self._not_found)

    # ---------------------------------------------------------------- plumbing

    def _action(self, fn: Callable[[Dashboard, web.Request, Viewer], Awaitable[Any]]) -> Any:
        return self._page(partial(fn, self), mutates=True)

    def _page(self, handler: Handler, mutates: bool = False) -> Any:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            assert self.gate is not None
            foreign = self.guard.foreign_host(request)
            if foreign is not None:
                return self.error(request, 403, foreign)
            if request.method not in SAFE_METHODS and not same_origin(request):
                return self.error(request, 403, "Cross-site request refused.")
            viewer = self.gate.viewer(request)
            if viewer is None:
                if request.method in SAFE_METHODS and request.path != MOUNT + "/events":
                    target = urllib.parse.quote(self._public(request.path_qs), safe="")
                    raise web.HTTPSeeOther(f"{self.base}/login?next={target}")
                return self.error(request, 403, "Log in first.")
            if mutates and viewer.read_only:
                return self.error(request, 403, "This session is read-only.")
            response = await handler(request, viewer)
            return response

        return wrapped

    def _public(self, path_qs: str) -> str:
        """A daemon path under MOUNT as the browser sees it, under base_path."""
        return self.base + path_qs[len(MOUNT) :] if path_qs.startswith(MOUNT) else self.base

    def render(
        self, request: web.Request, template: str, viewer: Viewer | None, status: int = 200,
        **context: Any,
    ) -> web.Response:  # fmt: skip
        body = self.env.get_template(template).render(
            base=self.base,
            v=self._version,
            viewer=viewer,
            login_required=self.gate is not None and self.gate.login_required,
            notice=request.query.get("notice", ""),
            path=request.path,
            **context,
        )
        return web.Response(
            text=body,
            status=status,
            content_type="text/html",
            charset="utf-8",
            headers={**SECURITY_HEADERS, "Cache-Control": "no-store"},
        )

    def error(self, request: web.Request, status: int, message: str) -> web.Response:
        viewer = self.gate.viewer(request) if self.gate else None
        return self.render(request, "error.html", viewer, status, message=message)

    async def _not_found(self, request: web.Request) -> web.Response:
        return self.error(request, 404, "No such page.")

    async def _to_root(self, request: web.Request) -> web.Response:
        raise web.HTTPPermanentRedirect(self.base + "/")

    def back(self, where: str, notice: str) -> NoReturn:
        """Redirect (303) to ``where`` under base_path with a notice for the page."""
        sep = "&" if "?" in where else "?"
        raise web.HTTPSeeOther(f"{self.base}{where}{sep}notice={urllib.parse.quote(notice)}")

    async def queue_of(self, request: web.Request, viewer: Viewer) -> QueueRecord:
        name = request.match_info["name"]
        q = await self.source.store.lookup(name, viewer.account)
        if q is None:
            raise web.HTTPNotFound(
                text=self.env.get_template("error.html").render(
                    base=self.base, v=self._version, viewer=viewer, notice="", path="",
                    login_required=False, message=f"No queue named {name}.",
                ),
                content_type="text/html",
                headers=SECURITY_HEADERS,
            )  # fmt: skip
        return q

    def audit(self, viewer: Viewer, action: str, queue: str | None, **counts: Any) -> None:
        log.info(
            "dashboard: %s%s by %s",
            action,
            f" on {queue}" if queue else "",
            viewer.account,
            extra={"event": "ui_action", "action": action, "account": viewer.account,
                   "token_id": viewer.token_id, "queue": queue, **counts},
        )  # fmt: skip

    def operator(self, viewer: Viewer) -> bool:
        """Whether ``viewer`` runs the daemon, not only an account on it. A reload re-reads
        every tenant's config and workers, and what it changed names them all: only the
        admin of a daemon serving one account (none configured, or exactly one) may reload
        it from the dashboard or read what the last reload did. With several accounts the
        operator reloads with SIGHUP (``systemctl reload ocd``)."""
        return not viewer.read_only and len(self.source.config.accounts) <= 1

    def _rates(self, viewer: Viewer) -> dict[str, dict[str, int]]:
        return {r["name"]: r["rates"] for r in self.hub.rows.get(viewer.account, [])}

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = self._static.get(name)
        if body is None:
            raise web.HTTPNotFound()
        ext = name[name.rfind(".") :]
        return web.Response(
            body=body,
            content_type=STATIC_TYPES.get(ext, "application/octet-stream"),
            headers={
                "Cache-Control": "public, max-age=31536000, immutable",
                "X-Content-Type-Options": "nosniff",
            },
        )

    # ---------------------------------------------------------------- login

    async def login_form(self, request: web.Request, error: str = "") -> web.Response:
        assert self.gate is not None
        nxt = request.query.get("next", "")
        return self.render(request, "login.html", None, 401 if error else 200,
                           error=error, next=nxt)  # fmt: skip

    async def login(self, request: web.Request) -> web.StreamResponse:
        assert self.gate is not None
        if not same_origin(request) or self.guard.foreign_host(request) is not None:
            return self.error(request, 403, "Cross-site request refused.")
        form = await request.post()
        viewer = self.gate.login(str(form.get("token", "")))
        if viewer is None:
            log.warning("dashboard login refused", extra={"event": "ui_login_refused"})
            return await self.login_form(request, "That token is not valid here.")
        nxt = str(form.get("next", ""))
        if not nxt.startswith(self.base + "/") or "//" in nxt or "\\" in nxt:
            nxt = self.base + "/"
        response = see_other(nxt)  # a response, not an HTTPException returned (deprecated)
        self.gate.set_cookie(request, response, viewer)
        self.audit(viewer, "login", None)
        return response

    async def logout(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        assert self.gate is not None
        response = see_other(self.base + "/login")
        self.gate.clear_cookie(response)
        return response

    # ---------------------------------------------------------------- pages

    async def queues(self, request: web.Request, viewer: Viewer) -> web.Response:
        rows = await queue_rows(self.source, viewer.account, self._rates(viewer))
        sort = request.query.get("sort", "name")
        keys = {"name", "ready", "delayed", "inflight", "dlq_depth", "oldest_s", "sent", "acked"}
        if sort not in keys:
            sort = "name"
        desc = request.query.get("dir", "desc" if sort != "name" else "asc") == "desc"
        rows.sort(key=lambda r: r[sort] if r[sort] is not None else -1, reverse=desc)
        summary = {
            k: sum(r[k] or 0 for r in rows) for k in ("ready", "delayed", "inflight", "sent")
        }
        return self.render(request, "queues.html", viewer, rows=rows, sort=sort, desc=desc,
                           summary=summary)  # fmt: skip

    async def queue(self, request: web.Request, viewer: Viewer) -> web.Response:
        q = await self.queue_of(request, viewer)
        src = self.source
        now = src.clock()
        params, query, error = browse_params(request.query)
        search = params["q"] or params["id"]
        scanned = None
        if error:
            rows = []
        elif search:
            wanted = SearchQuery(
                needle=params["q"].encode() or None,
                message_id=params["id"] or None,
                scan_limit=src.config.ui.search_scan_limit,
                limit=query.limit,
                body_bytes=800,
            )
            found = await src.store.search(q, now, wanted)
            rows, scanned = found.rows, found.scanned
        else:
            rows = await src.store.browse(q, now, query)
        more = len(rows) == query.limit and not search
        next_cursor = f"{rows[-1].sent_ms}-{rows[-1].seq}" if rows and more else ""
        history = self.hub.queue_history(q).series()
        charts = [
            ("Backlog (messages)", sparkline(history["backlog"])),
            ("Sent per minute", sparkline(history["sent"])),
            ("Acked per minute", sparkline(history["acked"])),
            ("Retried per minute", sparkline(history["retried"])),
            ("Dead-lettered per minute", sparkline(history["dead_lettered"])),
        ]
        rows_now = await queue_rows(src, viewer.account, self._rates(viewer))
        row = next((r for r in rows_now if r["name"] == q.name), None)
        sources = src.admin.dead_letter_sources(q)
        wc = src.admin.worker_consumer(q)
        pc = src.store.pull_consumer(q)
        return self.render(
            request, "queue.html", viewer, q=q, row=row, params=params, error=error,
            messages=[message_view(m, now) for m in rows], next_cursor=next_cursor,
            scanned=scanned, scan_limit=src.config.ui.search_scan_limit, charts=charts,
            sources=sources, worker_consumer=wc, pull_consumer=pc,
            fifo=bool(getattr(q, "fifo", False)),
            query_string=urllib.parse.urlencode(
                {k: v for k, v in params.items() if v and k != "cursor"}
            ),
        )  # fmt: skip

    async def message(self, request: web.Request, viewer: Viewer) -> web.Response:
        q = await self.queue_of(request, viewer)
        m = await self.source.store.message(q, int(request.match_info["seq"]), FULL_BODY_BYTES)
        if m is None:
            return self.error(request, 404, "That message is gone (acked, moved or purged).")
        view = message_view(m, self.source.clock(), full=True)
        if request.query.get("fragment"):  # the row's expander fetches only the body
            return self.render(request, "body.html", viewer, m=view, q=q)
        return self.render(request, "message.html", viewer, m=view, q=q)

    async def download(self, request: web.Request, viewer: Viewer) -> web.Response:
        q = await self.queue_of(request, viewer)
        m = await self.source.store.message(q, int(request.match_info["seq"]), 1 << 30)
        if m is None:
            raise web.HTTPNotFound()
        return web.Response(
            body=m.body,
            content_type="application/octet-stream",
            headers={
                **SECURITY_HEADERS,
                "Content-Disposition": f'attachment; filename="{m.id}.{m.content_type}"',
                "Cache-Control": "no-store",
            },
        )

    async def consumers(self, request: web.Request, viewer: Viewer) -> web.Response:
        src = self.source
        stats = await src.store.queue_stats(src.clock())
        rows = []
        for (account, name), d in sorted(src.dispatchers.items()):
            if account != viewer.account:
                continue
            p = d.policy
            rows.append({
                "queue": name, "kind": "worker", "worker": d.worker,
                "batch_size": p.max_batch_size,
                "concurrency": p.max_concurrency or "auto",
                "inflight": d.inflight, "last": d.last_outcome,
                "dead_letter_queue": p.dead_letter_queue, "leases": None,
            })  # fmt: skip
        for q in src.store.queues():
            pc = src.store.pull_consumer(q) if q.account == viewer.account else None
            if pc is None:
                continue
            rows.append({
                "queue": q.name, "kind": "http pull", "worker": None,
                "batch_size": pc.batch_size, "concurrency": "—", "inflight": None,
                "last": None, "dead_letter_queue": pc.dead_letter_queue,
                "leases": stats.get(q.key, (0, 0))[1],
            })  # fmt: skip
        return self.render(request, "consumers.html", viewer, rows=rows)

    async def workers(self, request: web.Request, viewer: Viewer) -> web.Response:
        rows = []
        loaded = {w.config.name: w for w in self.source.workers}  # the Python ones
        for c in self.source.config.workers:
            w = loaded.get(c.name)
            if c.account != viewer.account or (w is None and not c.js):
                continue
            handlers = ["fetch"] if w is not None and w.fetch is not None else []
            handlers += ["queue"] if w is not None and w.queue is not None else []
            status = f"loaded ({', '.join(handlers)})" if w is not None else "in workerd"
            rows.append({
                "name": c.name, "module": c.module or str(c.main), "status": status,
                "bindings": [(b.kind, b.name, b.target) for b in c.bindings()],
                "consumers": [x.queue for x in c.consumers], "routes": list(c.routes),
                "crons": list(getattr(c, "crons", ()) or ()),
            })  # fmt: skip
        src = self.source
        return self.render(
            request, "workers.html", viewer, rows=rows, last_reload=src.last_reload,
            state=src.state, operator=self.operator(viewer),
        )  # fmt: skip

    async def task(self, request: web.Request, viewer: Viewer) -> web.Response:
        task = self.source.admin.task(viewer.account, request.match_info["task_id"])
        if task is None:
            return self.error(request, 404, "No such task (finished tasks are kept a while).")
        return self.render(request, "task.html", viewer, task=task.json())

    # ---------------------------------------------------------------- live

    async def live_stats(self, request: web.Request, viewer: Viewer) -> web.Response:
        """What the live hub costs: open streams, and the loop time of its last ticks."""
        costs = sorted(self.hub.tick_cost_s)

        def ms(p: float) -> float | None:
            return (
                round(costs[min(len(costs) - 1, int(p * len(costs)))] * 1000, 3) if costs else None
            )

        return web.json_response(
            {"subscribers": len(self.hub.subscribers), "ticks": len(costs),
             "tick_ms_p50": ms(0.5), "tick_ms_p99": ms(0.99), "tick_ms_max": ms(1.0)},
            headers={"Cache-Control": "no-store"},
        )  # fmt: skip

    async def events(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        gate = self.gate
        assert gate is not None
        return await stream(
            request,
            self.hub,
            viewer.account,
            SECURITY_HEADERS,
            lambda: gate.current(viewer) is not None,
        )


__all__ = ["COOKIE", "MOUNT", "Dashboard"]
