"""ocd's extensions for looking inside queues (what the dashboard uses): pages of messages
by keyset cursor, a bounded payload search, and bulk redrive/delete tasks.

Browsing and search never lease, ack or reorder; their POSTs are open to read-only tokens.
A move task is ``ocd.admin``'s: bounded at start, chunked, cancellable.
"""

from __future__ import annotations

import base64
from typing import Any

from aiohttp import web

from ocd.errors import MoveTaskRunning
from ocd.http.cloudflare.context import ApiContext
from ocd.http.cloudflare.envelope import (
    QUEUE_NOT_FOUND,
    TASK_NOT_FOUND,
    TASK_RUNNING,
    ApiError,
    ApiRouter,
    invalid,
    ok,
)
from ocd.http.cloudflare.validate import Fields, json_object
from ocd.store import BROWSE_STATES, BrowseCursor, Browsed, BrowseQuery, QueueRecord, SearchQuery

MAX_PAGE = 100
MAX_BODY_BYTES = 65_536  # the most of one body a browse shows
PREVIEW_BYTES = 800  # a row's preview: room for 200 characters of UTF-8
FILTER_KEYS = ("state", "min_attempts", "sent_after_ms", "sent_before_ms")
BROWSE_KEYS = ("limit", "order", "cursor", "body_bytes", *FILTER_KEYS)


def cursor_text(r: Browsed) -> str:
    return f"{r.sent_ms}-{r.seq}"


def parse_cursor(raw: str | None, pointer: str = "/cursor") -> BrowseCursor | None:
    if raw is None or raw == "":
        return None
    sent, _, seq = raw.partition("-")
    if not (sent.isascii() and sent.isdigit() and seq.isascii() and seq.isdigit()):
        raise invalid('cursor must be "<sent_ms>-<seq>" as a page returned it', pointer)
    if len(sent) > 18 or len(seq) > 18:
        raise invalid("cursor is out of range", pointer)
    return BrowseCursor(int(sent), int(seq))


def state_of(r: Browsed, now_ms: int) -> str:
    if r.visible_ms <= now_ms:
        return "ready"
    return "inflight" if r.leased else "delayed"


def browsed_json(r: Browsed, now_ms: int) -> dict[str, Any]:
    if r.content_type == "text":
        body = r.body.decode("utf-8", errors="replace")
    else:
        body = base64.b64encode(r.body).decode()
    out: dict[str, Any] = {
        "id": r.id,
        "seq": r.seq,
        "cursor": cursor_text(r),
        "timestamp_ms": r.sent_ms,
        "visible_ms": r.visible_ms,
        "attempts": r.attempts,
        "state": state_of(r, now_ms),
        "size": r.size,
        "metadata": {"CF-Content-Type": r.content_type},
        "body": body,
        "body_truncated": len(r.body) < r.size,
    }
    # FIFO queues' messages (once the store's browse rows carry them), as in pull and peek.
    for key, attr in (("message_group_id", "group"), ("sequence_number", "sequence")):
        value = getattr(r, attr, None)
        if value is not None:
            out[key] = value
    return out


def browse_query(f: Fields) -> BrowseQuery:
    order = f.string("order", "oldest")
    if order not in ("oldest", "newest"):
        raise invalid('order must be "oldest" or "newest"', f.where("order"))
    state = f.string("state", "any")
    if state not in BROWSE_STATES:
        raise invalid(f"state must be one of {', '.join(BROWSE_STATES)}", f.where("state"))
    return BrowseQuery(
        limit=f.integer("limit", 1, MAX_PAGE, 25),
        newest_first=order == "newest",
        after=parse_cursor(f.string("cursor", None), f.where("cursor")),
        state=state,
        min_attempts=f.integer("min_attempts", 0, 1000, 0),
        sent_from_ms=f.integer("sent_after_ms", 0, 1 << 53, None),
        sent_to_ms=f.integer("sent_before_ms", 0, 1 << 53, None),
        body_bytes=f.integer("body_bytes", 0, MAX_BODY_BYTES, PREVIEW_BYTES),
    )


class BrowseRoutes:
    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx

    def add_to(self, router: ApiRouter, prefix: str = "") -> None:
        m = prefix + "/accounts/{account_id}/queues/{queue_id}/messages"
        router.add_post(m + "/browse", self.browse)
        router.add_post(m + "/search", self.search)
        router.add_post(m + "/move", self.move)
        t = prefix + "/accounts/{account_id}/move_tasks"
        router.add_get(t, self.list_tasks)
        router.add_get(t + "/{task_id}", self.get_task)
        router.add_post(t + "/{task_id}/cancel", self.cancel_task)

    async def browse(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(await json_object(request, optional=True), known=BROWSE_KEYS)
        query = browse_query(f)
        now = self.ctx.clock()
        rows = await self.ctx.store.browse(q, now, query)
        more = len(rows) == query.limit
        return ok(
            {
                "messages": [browsed_json(r, now) for r in rows],
                "cursor": cursor_text(rows[-1]) if rows and more else None,
            }
        )

    async def search(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(await json_object(request), known=("query", "message_id", "limit", "body_bytes"))
        text = f.string("query", None) or None
        message_id = f.string("message_id", None) or None
        if text is None and message_id is None:
            raise invalid('give "query" (a body substring) or "message_id"', "/query")
        limit = f.integer("limit", 1, MAX_PAGE, 25)
        body_bytes = f.integer("body_bytes", 0, MAX_BODY_BYTES, PREVIEW_BYTES)
        now = self.ctx.clock()
        query = SearchQuery(
            # a lone surrogate (JSON "\\ud800") cannot be in a UTF-8 body, but can be asked for
            needle=text.encode("utf-8", "surrogatepass") if text is not None else None,
            message_id=message_id,
            scan_limit=self.ctx.search_scan_limit,
            limit=limit,
            body_bytes=body_bytes,
        )
        found = await self.ctx.store.search(q, now, query)
        return ok(
            {
                "messages": [browsed_json(r, now) for r in found.rows],
                "scanned": found.scanned,
                "scan_limit": self.ctx.search_scan_limit,
            }
        )

    async def move(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(
            await json_object(request), known=("action", "destination", "seqs", "filter", "rate")
        )
        action = f.string("action")
        if action not in ("redrive", "delete"):
            raise invalid('action must be "redrive" or "delete"', "/action")
        if action == "delete" and f.string("destination", None) is not None:
            # most likely a redrive meant; a delete cannot be undone
            raise invalid("a delete has no destination", "/destination")
        dest = await self._destination(q, f) if action == "redrive" else None
        seqs = None
        if "seqs" in f.data:
            raw = f.array("seqs")
            if not raw or len(raw) > 10_000 or not all(_is_seq(s) for s in raw):
                raise invalid("seqs must hold 1..10000 message seqs (integers)", "/seqs")
            seqs = [int(s) for s in raw]
            held = set(await self.ctx.store.present(q, seqs))
            for i, seq in enumerate(seqs):
                if seq not in held:
                    raise invalid(f"the queue holds no message with seq {seq}", f"/seqs/{i}")
        query = browse_query(f.object("filter", FILTER_KEYS))
        rate = f.integer("rate", 1, 10_000, None)
        try:
            task = await self.ctx.admin.start_move(
                q, dest, seqs, query, rate, dead_lettered_only=dest is not None and seqs is None
            )
        except MoveTaskRunning as e:
            raise ApiError(409, TASK_RUNNING, str(e)) from None
        return ok(task.json())

    async def _destination(self, q: QueueRecord, f: Fields) -> QueueRecord:
        name = f.string("destination", None)
        if name == "":
            raise invalid("destination must be a queue's name", "/destination")
        if name is None:
            sources = self.ctx.admin.dead_letter_sources(q)
            if len(sources) != 1:
                raise invalid(
                    "name the destination: this queue is the dead-letter queue of "
                    f"{len(sources)} queue(s)",
                    "/destination",
                )
            name = sources[0]
        dest = await self.ctx.store.lookup(name, q.account)
        if dest is None:
            raise ApiError(404, QUEUE_NOT_FOUND, f"Queue not found: {name}")
        if dest.key == q.key:
            raise invalid("a queue cannot be redriven into itself", "/destination")
        return dest

    async def list_tasks(self, request: web.Request) -> web.Response:
        account = self.ctx.account(request)
        return ok([t.json() for t in self.ctx.admin.tasks(account)])

    async def get_task(self, request: web.Request) -> web.Response:
        account = self.ctx.account(request)
        task = self.ctx.admin.task(account, request.match_info["task_id"])
        if task is None:
            raise ApiError(404, TASK_NOT_FOUND, "Move task not found")
        return ok(task.json())

    async def cancel_task(self, request: web.Request) -> web.Response:
        account = self.ctx.account(request)
        task = self.ctx.admin.task(account, request.match_info["task_id"])
        if task is None:
            raise ApiError(404, TASK_NOT_FOUND, "Move task not found")
        await self.ctx.admin.cancel_move(task)
        return ok(task.json())


def _is_seq(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 62
