"""What the pages show, as plain values: queue rows, a browser's parameters, one message,
a sparkline. No I/O except the store reads named here."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any

import jinja2

from ocd.counts import queue_counts
from ocd.http.ui.source import UiSource
from ocd.store import BROWSE_STATES, BrowseCursor, Browsed, BrowseQuery

PAGE_SIZES = (25, 50, 100)
PREVIEW_CHARS = 200
PREVIEW_BYTES = 800  # 200 characters of UTF-8 at most


async def queue_rows(
    src: UiSource, account: str, rates_of: Mapping[str, Mapping[str, int]]
) -> list[dict[str, Any]]:
    """One row per queue of the account, read now (the store's counts, no scan); the
    per-minute rates come from the live hub's ring buffers (``rates_of``)."""
    now = src.clock()
    stats = await src.store.queue_stats(now)
    dlq_of = {k[1]: wc.consumer.dead_letter_queue for k, wc in src.admin.worker_consumers.items()
              if k[0] == account and wc.consumer.dead_letter_queue}  # fmt: skip
    rows = []
    for q in src.store.queues():
        if q.account != account:
            continue
        pc = src.store.pull_consumer(q)
        if pc is not None and pc.dead_letter_queue:
            dlq_of[q.name] = pc.dead_letter_queue
    for q in src.store.queues():
        if q.account != account:
            continue
        b = await src.store.backlog(q)
        c = queue_counts(b.count, stats.get(q.key))
        dlq = dlq_of.get(q.name)
        dlq_q = src.store.queue(dlq, account) if dlq else None
        wc = src.admin.worker_consumer(q)
        pc = src.store.pull_consumer(q)
        consumer = f"worker {wc.worker}" if wc else ("http pull" if pc else "")
        rates = rates_of.get(q.name, {})
        rows.append(
            {
                "name": q.name,
                "ready": c.ready,
                "delayed": c.delayed,
                "inflight": c.in_flight,
                "dlq": dlq,
                "dlq_depth": src.store.backlog_count(dlq_q) if dlq_q else None,
                "oldest_s": max(0.0, (now - b.oldest_ms) / 1000) if b.oldest_ms else 0.0,
                "sent": rates.get("sent", 0),
                "acked": rates.get("acked", 0),
                "retried": rates.get("retried", 0),
                "dead_lettered": rates.get("dead_lettered", 0),
                "paused": q.settings.delivery_paused,
                "fifo": bool(getattr(q, "fifo", False)),
                "consumer": consumer,
                "is_dlq": name_is_dlq(q.name, dlq_of),
            }
        )
    return rows


def name_is_dlq(name: str, dlq_of: Mapping[str, str | None]) -> bool:
    return name in dlq_of.values()


def _ms(raw: str) -> int | None:
    """A datetime-local value (taken as UTC) or epoch ms; None if empty or wrong."""
    raw = raw.strip()
    if not raw:
        return None
    if raw.isdigit() and len(raw) <= 15:
        return int(raw)
    try:
        t = dt.datetime.fromisoformat(raw)
    except ValueError:
        return -1
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


def browse_params(query: Mapping[str, Any]) -> tuple[dict[str, str], BrowseQuery, str]:
    """The message browser's query string -> (its values for the form, the store query,
    an error message or "")."""
    p = {k: str(query.get(k, "") or "") for k in
         ("order", "limit", "cursor", "state", "attempts", "from", "to", "q", "id")}  # fmt: skip
    error = ""
    order = p["order"] if p["order"] in ("oldest", "newest") else "oldest"
    limit = int(p["limit"]) if p["limit"].isdigit() and int(p["limit"]) in PAGE_SIZES else 25
    state = p["state"] if p["state"] in BROWSE_STATES else "any"
    attempts = int(p["attempts"]) if p["attempts"].isdigit() and len(p["attempts"]) < 5 else 0
    after = None
    if p["cursor"]:
        sent, _, seq = p["cursor"].partition("-")
        if sent.isdigit() and seq.isdigit() and len(sent) <= 18 and len(seq) <= 18:
            after = BrowseCursor(int(sent), int(seq))
        else:
            error = "That page cursor is not valid; showing the first page."
    low, high = _ms(p["from"]), _ms(p["to"])
    if low == -1 or high == -1:
        error, low, high = "Times must look like 2026-01-31T12:00 (UTC).", None, None
    if len(p["q"]) > 200:
        error, p["q"] = "Search for at most 200 characters.", ""
    p.update(order=order, limit=str(limit), state=state, attempts=str(attempts or ""))
    bq = BrowseQuery(limit=limit, newest_first=order == "newest", after=after, state=state,
                     min_attempts=attempts, sent_from_ms=low, sent_to_ms=high,
                     body_bytes=PREVIEW_BYTES)  # fmt: skip
    return p, bq, error


def message_view(m: Browsed, now_ms: int, full: bool = False) -> dict[str, Any]:
    """A message for a template: its body as text (never marked safe: autoescaped)."""
    if m.content_type in ("json", "text"):
        text = m.body.decode("utf-8", errors="replace")
        kind = m.content_type
    else:
        text = base64.b64encode(m.body).decode()
        kind = f"{m.content_type}, base64"
    truncated = len(m.body) < m.size
    preview = text[:PREVIEW_CHARS]
    state = "ready" if m.visible_ms <= now_ms else ("in flight" if m.leased else "delayed")
    return {
        "seq": m.seq,
        "id": m.id,
        "sent_ms": m.sent_ms,
        "attempts": m.attempts,
        "content_type": m.content_type,
        "size": m.size,
        "state": state,
        "preview": preview,
        "preview_cut": len(text) > PREVIEW_CHARS or truncated,
        "body": text if full else "",
        "body_kind": kind,
        "truncated": truncated,
        # FIFO queues' messages (once the store's browse rows carry them)
        "group": getattr(m, "group", None),
        "sequence_number": getattr(m, "sequence", None),
    }


def sparkline(values: list[float], width: int = 240, height: int = 40) -> dict[str, Any]:
    """An SVG polyline's points (drawn by the template), and the numbers as text."""
    if not values:
        return {"points": "", "last": None, "peak": None, "count": 0}
    peak = max(values) or 1.0
    n = len(values)
    step = width / max(n - 1, 1)
    pts = " ".join(
        f"{i * step:.1f},{height - 2 - (v / peak) * (height - 4):.1f}" for i, v in enumerate(values)
    )
    return {"points": pts, "last": values[-1], "peak": max(values), "count": n}


def environment() -> jinja2.Environment:
    """The templates, autoescaped whatever their names: message bodies are hostile."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ocd.http.ui", "templates"),
        autoescape=True,  # every template, whatever its name: message bodies are hostile
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["iso"] = _iso
    env.filters["human_time"] = _human_time
    env.filters["age"] = _age
    return env


def _iso(ms: int | None) -> str:
    if not ms:
        return ""
    t = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _human_time(ms: int | None) -> str:
    if not ms:
        return "—"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _age(seconds: float) -> str:
    if seconds <= 0:
        return "—"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
