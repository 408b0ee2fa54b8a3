"""The dashboard's actions: each one calls the domain operation the REST API calls
(``producer.send``, ``admin.change_queue``, ``admin.purge``, ``admin.start_move``, the
daemon's reload), logs a ``ui_action`` event, and redirects back with a notice."""

from __future__ import annotations

import json
import secrets
import urllib.parse
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from aiohttp import web

from ocd import limits
from ocd.errors import QueueSendError
from ocd.http.ui.auth import Viewer
from ocd.http.ui.views import browse_params
from ocd.store import BrowseQuery, QueueSettings

if TYPE_CHECKING:
    from ocd.http.ui.app import Dashboard


async def send(ui: Dashboard, request: web.Request, viewer: Viewer) -> web.StreamResponse:
    q = await ui.queue_of(request, viewer)
    form = await request.post()
    ctype = str(form.get("content_type", "json"))
    text = str(form.get("body", ""))
    raw_delay = str(form.get("delay", "") or "0")
    where = f"/queues/{urllib.parse.quote(q.name)}"
    if ctype not in ("json", "text"):
        ui.back(where, "Content type must be json or text.")
    body: Any = text
    if ctype == "json":
        try:
            body = json.loads(text)
        except ValueError as e:
            ui.back(where, f"Not valid JSON: {e}")
    if not raw_delay.isdigit() or int(raw_delay) not in limits.DELAY_S:
        ui.back(where, f"Delay must be {limits.DELAY_S.text} seconds.")
    try:
        group = str(form.get("group", "")) or None
        # a FIFO test message is its own: a fresh deduplication id unless the body decides
        dedup = None
        if q.fifo and not q.settings.content_based_deduplication:
            dedup = secrets.token_hex(16)
        delay = int(raw_delay) if not q.fifo else None
        await ui.source.producer.send(q, [(body, ctype, delay, group, dedup)], None)
    except (QueueSendError, TypeError) as e:
        ui.back(where, f"Not sent: {e}")
    ui.audit(viewer, "send", q.name, messages=1)
    ui.back(where, "Message sent.")


async def _set_paused(
    ui: Dashboard, request: web.Request, viewer: Viewer, paused: bool
) -> NoReturn:
    q = await ui.queue_of(request, viewer)
    await ui.source.admin.change_queue(
        q, lambda s: QueueSettings(s.delivery_delay_s, s.message_retention_period_s, paused)
    )
    ui.audit(viewer, "pause" if paused else "resume", q.name)
    done = "Delivery paused." if paused else "Delivery resumed."
    ui.back(f"/queues/{urllib.parse.quote(q.name)}", done)


async def pause(ui: Dashboard, request: web.Request, viewer: Viewer) -> web.StreamResponse:
    await _set_paused(ui, request, viewer, True)


async def resume(ui: Dashboard, request: web.Request, viewer: Viewer) -> web.StreamResponse:
    await _set_paused(ui, request, viewer, False)


async def purge(ui: Dashboard, request: web.Request, viewer: Viewer) -> web.StreamResponse:
    q = await ui.queue_of(request, viewer)
    form = await request.post()
    where = f"/queues/{urllib.parse.quote(q.name)}"
    if str(form.get("confirm", "")) != q.name:
        ui.back(where, "Not purged: type the queue's name to confirm.")
    before = ui.source.store.backlog_count(q)
    await ui.source.admin.purge(q)
    ui.audit(viewer, "purge", q.name, messages=before)
    ui.back(where, "Queue purged.")


async def move(ui: Dashboard, request: web.Request, viewer: Viewer) -> web.StreamResponse:
    q = await ui.queue_of(request, viewer)
    form = await request.post()
    where = f"/queues/{urllib.parse.quote(q.name)}"
    action = str(form.get("action", ""))
    if action not in ("redrive", "delete"):
        ui.back(where, "Choose redrive or delete.")
    dest = None
    if action == "redrive":
        name = str(form.get("destination", ""))
        dest = await ui.source.store.lookup(name, viewer.account) if name else None
        if dest is None or dest.key == q.key:
            ui.back(where, "Choose the queue to redrive to.")
    seqs: list[int] | None = None
    query = BrowseQuery()
    if form.get("scope") == "all":
        _, query, error = browse_params(form)
        if error:
            ui.back(where, error)
    else:
        raw = [str(s) for s in form.getall("seq", [])]
        seqs = [int(s) for s in raw if s.isdigit() and len(s) <= 18]
        if not seqs:
            ui.back(where, "Select at least one message, or all matching the filter.")
    task = await ui.source.admin.start_move(q, dest, seqs, replace(query, limit=500))
    ui.audit(viewer, action, q.name, total=task.total, task=task.id,
                destination=dest.name if dest else None)  # fmt: skip
    raise web.HTTPSeeOther(f"{ui.base}/tasks/{task.id}")


async def cancel(ui: Dashboard, request: web.Request, viewer: Viewer) -> web.StreamResponse:
    task = ui.source.admin.task(viewer.account, request.match_info["task_id"])
    if task is None:
        return ui.error(request, 404, "No such task.")
    await ui.source.admin.cancel_move(task)
    ui.audit(viewer, "cancel", task.queue, task=task.id, done=task.done)
    raise web.HTTPSeeOther(f"{ui.base}/tasks/{task.id}")


async def reload(ui: Dashboard, request: web.Request, viewer: Viewer) -> web.StreamResponse:
    if not ui.operator(viewer):  # one tenant may not reload the others' workers
        return ui.error(request, 403, "Only the daemon's operator may reload it.")
    applied = await ui.source.reload()
    ui.reconfigure()
    ui.audit(viewer, "reload", None, applied=applied)
    ui.back("/workers", "Reload applied." if applied else "Reload rejected (see below).")
