"""Rows to records, the same for every SQL backend: both keep queues and pull consumers in
the same columns, and a consumer's settings as one JSON text."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ocd.store import rules
from ocd.store.values import (
    BrowseCursor,
    Browsed,
    BrowseQuery,
    Delivery,
    MoveTaskRow,
    PullConsumer,
    QueueExtras,
    QueueRecord,
    QueueSettings,
)


def queue_from_row(row: Any) -> QueueRecord:
    """(key, account, name, queue_id, created_ms, modified_ms, delay_s, retention_s, paused,
    purged_ms, content_dedup, dedup_scope) -> QueueRecord."""
    key, account, name, qid, created, modified, delay, retention, paused, purged, cbd, scope = row
    settings = QueueSettings(delay, retention, bool(paused), bool(cbd), scope)
    return QueueRecord(key, account, name, qid, created, modified, settings, purged)


@dataclass(frozen=True, slots=True)
class ClaimSplit:
    """A claim's rows: what goes out, and what had run out of attempts before it."""

    deliveries: list[Delivery]  # in seq order
    spent: list[int]  # seqs, for the dead-letter queue
    exhausted: list[str]  # their ids
    groups: set[str]  # the FIFO groups of the spent ones


def merged_page(found: Iterable[Browsed], query: BrowseQuery) -> list[Browsed]:
    """A browse page from the two a backend reads (its late rows, its rows in order): in
    (send time, seq) order as the query asks, at most its limit."""
    page = sorted(found, key=lambda b: (b.sent_ms, b.seq), reverse=query.newest_first)
    return page[: query.limit]


def claimed(rows: Iterable[Any], lease: int, max_attempts: int) -> ClaimSplit:
    """A standard queue's claimed rows (seq, id, content_type, body, sent_ms, attempts,
    attrs, first_received_ms), split by ``rules.out_of_attempts``."""
    deliveries: list[Delivery] = []
    spent: list[int] = []
    exhausted: list[str] = []
    for seq, mid, ctype, body, sent_ms, attempts, attrs, first in rows:
        if rules.out_of_attempts(attempts, max_attempts):
            spent.append(seq)
            exhausted.append(mid)
        else:
            deliveries.append(  # positional: keywords cost a NamedTuple half again
                Delivery(
                    seq, mid, ctype, body, sent_ms, attempts, lease, None, None, None, attrs, first
                )
            )
    deliveries.sort(key=lambda d: d.seq)
    return ClaimSplit(deliveries, spent, exhausted, set())


def fifo_claimed(rows: Iterable[Any], lease: int, max_attempts: int) -> ClaimSplit:
    """A FIFO queue's claimed rows (seq, id, content_type, body, sent_ms, attempts, grp,
    fseq, dedup, attrs, first_received_ms), in the order the claim took them, split by
    ``rules.out_of_attempts``."""
    deliveries: list[Delivery] = []
    spent: list[int] = []
    exhausted: list[str] = []
    groups: set[str] = set()
    for row in rows:
        seq, mid, ctype, body, sent_ms, attempts, grp, fseq, dedup, attrs, first = row
        if rules.out_of_attempts(attempts, max_attempts):
            spent.append(seq)
            exhausted.append(mid)
            groups.add(grp)
        else:
            deliveries.append(
                Delivery(
                    seq, mid, ctype, body, sent_ms, attempts, lease,
                    grp, fseq, dedup, attrs, first,
                )
            )  # fmt: skip
    return ClaimSplit(deliveries, spent, exhausted, groups)


def extras_row(extras: QueueExtras) -> tuple[str | None, str | None]:
    """The (sqs_attrs, tags) columns: JSON objects, NULL when empty."""
    a, t = extras.sqs_attrs, extras.tags
    return (
        json.dumps(a, sort_keys=True) if a else None,
        json.dumps(t, sort_keys=True) if t else None,
    )


def extras_from_row(sqs_attrs: str | None, tags: str | None) -> QueueExtras:
    return QueueExtras(
        {str(k): str(v) for k, v in json.loads(sqs_attrs or "{}").items()},
        {str(k): str(v) for k, v in json.loads(tags or "{}").items()},
    )


def settings_row(s: QueueSettings) -> tuple[int, int, bool, bool, str]:
    """The settings columns (delay_s, retention_s, paused, content_dedup, dedup_scope)."""
    return (
        s.delivery_delay_s,
        s.message_retention_period_s,
        s.delivery_paused,
        s.content_based_deduplication,
        s.deduplication_scope,
    )


def consumer_settings(c: PullConsumer) -> str:
    return json.dumps(
        {
            "batch_size": c.batch_size,
            "max_retries": c.max_retries,
            "visibility_timeout_ms": c.visibility_timeout_ms,
            "retry_delay": c.retry_delay_s,
        }
    )


def consumer_from_row(row: Any) -> PullConsumer:
    """(key, queue key, consumer_id, created_ms, dead_letter_queue, settings JSON)."""
    _key, queue, cid, created, dlq, settings = row
    s = json.loads(settings)
    return PullConsumer(
        queue,
        cid,
        created,
        dlq,
        s["batch_size"],
        s["max_retries"],
        s["visibility_timeout_ms"],
        s["retry_delay"],
    )


# The clock's mark (``Store.save_clock_mark``) in the meta table of either backend: 8 bytes,
# big-endian, so that comparing the stored values compares the times.
CLOCK_MARK_KEY = "clock_mark"


def mark_to_bytes(now_ms: int) -> bytes:
    return max(0, now_ms).to_bytes(8, "big")


def mark_from_bytes(value: bytes | None) -> int:
    return int.from_bytes(bytes(value), "big") if value else 0


def move_task_row(t: MoveTaskRow) -> tuple[Any, ...]:
    """The columns of a move task, in ``MOVE_TASK_COLUMNS`` order (both backends')."""
    bound = t.bound or (None, None)
    cursor = t.cursor or (None, None)
    return (
        t.task_id, t.account, t.source_id, t.source, t.destination_id, t.destination, t.total,
        t.started_ms, t.done, t.state, t.error, t.finished_ms, t.rate, bound[0], bound[1],
        cursor[0], cursor[1], t.spec, t.node,
    )  # fmt: skip


def move_task_from_row(row: Any) -> MoveTaskRow:
    (tid, account, sid, source, did, dest, total, started, done, state, error, finished, rate,
     bsent, bseq, csent, cseq, spec, node) = tuple(row)  # fmt: skip
    return MoveTaskRow(
        tid, account, sid, source, did, dest, total, started, done, state, error, finished, rate,
        BrowseCursor(bsent, bseq) if bsent is not None else None,
        BrowseCursor(csent, cseq) if csent is not None else None,
        spec, node,
    )  # fmt: skip
