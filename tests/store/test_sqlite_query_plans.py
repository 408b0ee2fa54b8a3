"""The hot-path statements stay O(log n) in the backlog: each one looks messages up by
primary key or by a bounded range of an index, never by walking a whole queue.

A deep backlog must not slow dispatch; a planner choice that walks the queue's index for
every ack made a 1,000,000-message backlog ten times slower once. This pins the plans."""

from __future__ import annotations

import sqlite3

import pytest

from ocd.store.sqlite import sql

Q1 = 1 << 40  # queue 1's ready band starts here (ocd.store.sqlite.layout)
SEQS = "[1099511627776, 1099511627777]"

HOT = {
    "READY_LOG": (
        sql.READY_LOG,
        {"q": 1, "now": 5, "n": 10, "start": Q1, "end": Q1 + (1 << 39)},
    ),
    "LOG_RUN": (sql.LOG_RUN, (Q1, Q1 + (1 << 39), 10, 5)),
    "COUNT_RUN": (sql.COUNT_RUN, (1, Q1, Q1 + 99)),
    "DELETE_SEQS": (sql.DELETE_SEQS.format(marks="?,?,?"), (1, 1, 2, 3)),
    "DELETE_RUN": (sql.DELETE_RUN, (1, Q1, Q1 + 99)),
    "REAPPEND": (
        sql.REAPPEND,
        {
            "base": Q1 + 5,
            "dest": 1,
            "vis": 5,
            "reset": 0,
            "add": 1,
            "first": 5,
            "seqs": SEQS,
            "src": 1,
        },
    ),
    "DELETE_LOG_SEQS": (sql.DELETE_LOG_SEQS, {"seqs": SEQS, "src": 1}),
    "HOLD": (sql.HOLD, {"until": 9, "q": 1, "now": 5, "seq": Q1, "next": Q1 + 10}),
    "LEASE_SURVIVORS": (sql.LEASE_SURVIVORS, {"lo": Q1, "hi": Q1 + 99, "q": 1}),
    "DROP_EMPTY_LEASES": (sql.DROP_EMPTY_LEASES, {"q": 1, "min": Q1, "max": Q1 + 99}),
    "PEEK_LOG": (sql.PEEK_LOG, {"q": 1, "end": Q1 + (1 << 39), "now": 5, "n": 10}),
}


# min(sent_ms) over the late index (queue, sent_ms) is a single seek (SQLite's min/max
# optimisation), although its plan reads like "(queue=?)".
MIN_MAX = {"OLDEST": (sql.OLDEST, (1,))}

BAND = {"lo": Q1, "end": Q1 + (1 << 39)}
TOP = 1 << 62
PAGE = {"q": 1, "now": 5, "b": 10, "from": 0, "to": TOP, "att": 0, "n": 10, **BAND}
# Reads in send time order: the late rows by their index, the rows in order by seq ranges.
IN_SEND_ORDER = {
    "EXPIRE": (sql.EXPIRE, (1, 5, 10)),
    "DELETE_QUEUE_MESSAGES": (sql.DELETE_QUEUE_MESSAGES, (1,)),
    "browse (newest first)": (sql.browse(True, "any"), {**PAGE, "cs": TOP, "cq": TOP}),
    "browse (oldest first, ready)": (sql.browse(False, "ready"), {**PAGE, "cs": 9, "cq": Q1}),
    "browse (in flight)": (sql.browse(True, "inflight"), {**PAGE, "cs": 9, "cq": Q1}),
    "SEARCH": (sql.SEARCH, {**PAGE, "scan": 100, "needle": b"1", "id": None}),
}


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    c = sqlite3.connect(tmp_path_factory.mktemp("plans") / "db.sqlite")
    for script in sql.MIGRATIONS:
        c.executescript(script)
    # Give the planner a deep queue, as it would see in production after ANALYZE or not.
    c.executemany(
        sql.insert_log(1),
        # sent in order, but one in ten came back late
        ((Q1 + i, 1, f"{i:032x}", "json", b"1", 1, i, i, None, i % 10 == 0) for i in range(20_000)),
    )
    # and a deep FIFO queue: 20,000 messages in two groups
    c.executemany(sql.insert_order(1), ((1, "ab"[i % 2], i + 1, Q1 + i, i) for i in range(20_000)))
    c.executemany(sql.add_groups(1), ((1, g, 0, Q1 + i) for i, g in enumerate("ab")))
    c.commit()
    yield c
    c.close()


@pytest.mark.parametrize("name", sorted(HOT))
def test_statement_never_walks_a_whole_queue(con, name):
    query, params = HOT[name]
    details = [row[3] for row in con.execute("EXPLAIN QUERY PLAN " + query, params)]
    for d in details:
        if d.startswith("SEARCH messages"):
            # a bare "(queue=?)" is the whole queue; a key or a range bound is fine
            assert "PRIMARY KEY" in d or "visible_ms" in d or "sent_ms" in d, (name, details)
        assert not d.startswith("SCAN messages"), (name, details)


def test_oldest_is_the_bands_first_row_or_a_min_over_the_late_index(con):
    query, params = MIN_MAX["OLDEST"]
    details = [row[3] for row in con.execute("EXPLAIN QUERY PLAN " + query, params)]
    searches = [d for d in details if d.startswith("SEARCH messages")]
    assert searches == [
        "SEARCH messages USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
        "SEARCH messages USING INDEX messages_late (queue=?)",
    ], details
    assert "min(sent_ms) FROM messages WHERE queue = ?1 AND late" in query
    assert con.execute(query, params).fetchone() == (0,)


@pytest.mark.parametrize("name", sorted(IN_SEND_ORDER))
def test_reads_in_send_order_walk_the_late_index_and_ranges_of_the_band(con, name):
    query, params = IN_SEND_ORDER[name]
    details = [row[3] for row in con.execute("EXPLAIN QUERY PLAN " + query, params)]
    for d in details:
        assert d.split()[:2] not in (["SCAN", t] for t in ("messages", "m", "x", "p")), (
            name,
            details,
        )
        if d.startswith(("SEARCH messages", "SEARCH m ", "SEARCH x ", "SEARCH p ")):
            assert "PRIMARY KEY (rowid" in d or "messages_late (queue=?" in d, (name, details)


# FIFO statements: a group's messages by fifo_order's key (queue, grp, fseq), groups by their
# ready index, message rows by seq; never a walk of a queue's rows or order rows.
FIFO = {
    "READY_FIFO": (sql.READY_FIFO, {"q": 1, "now": 5, "n": 10}),
    "READY_GROUPS": (sql.READY_GROUPS, (1, 5, 10)),
    "group_runs": (sql.group_runs(3), (1, 10, "a", "b", "c")),
    "refresh_groups (drop)": (sql.refresh_groups(2)[0], (1, "a", "b")),
    "refresh_groups (put)": (sql.refresh_groups(2)[1], (1, "a", "b")),
    "set_groups": (sql.set_groups(2), (1, 9, "a", "b")),
    "GROUP_AFTER": (sql.GROUP_AFTER, (1, "g", 3, 10)),
    "RETRY": (sql.RETRY, (5, 1, 1)),
    "RELEASE_ORDER": (sql.RELEASE_ORDER, (5, 1, 1, "g", 2)),
    "DELETE_ORDER": (sql.DELETE_ORDER, (1, "g", 2)),
    "DELETE_ORDER_OF": (sql.DELETE_ORDER_OF, (1, "g", 2, Q1)),
    "DELETE_ORDER_RUN": (sql.DELETE_ORDER_RUN, (1, "g", 2, 9, Q1)),
    "dedup_put_new": (sql.dedup_put_new(2), (1, 1, 5, "", "a", 9, "m", "", "b", 9, "n")),
    "DEDUP_FIND": (sql.dedup_find(2), ("", "a", "", "b", 1, 5)),
    "DEDUP_CLEAR": (sql.DEDUP_CLEAR, (1,)),
    "claim_runs": (sql.claim_runs(2), (9, 1, 1, 5, 1, "a", 1, 9, "b", 2, 8)),
    "CLAIMED_ROWS": (sql.CLAIMED_ROWS, (SEQS,)),
    "FIFO_INFO": (sql.FIFO_INFO.format(marks="?,?"), (1, Q1, Q1 + 1)),
    "PEEK": (sql.PEEK, {"q": 1, "now": 5, "n": 10}),
    "NOT_READY": (sql.NOT_READY, {"q": 1, "now": 5}),
    "PUSH_LEASES_HELD": (sql.PUSH_LEASES_HELD, (1, 5)),
    "FIFO_LIVE": (sql.FIFO_LIVE.format(marks="?,?"), (1, Q1, Q1 + 1)),
    "FIFO_CUT_AT": (sql.FIFO_CUT_AT, (1,)),
    "CUT_FIFO": (sql.CUT_FIFO, (Q1, Q1 + 10, 1)),
    "MOVE_FIFO": (
        sql.MOVE_FIFO,
        {"new": Q1 + 30_000, "dlq": 2, "now": 5, "fseq": 1, "seq": Q1, "src": 1},
    ),
    "EXPIRED_FIFO": (sql.EXPIRED_FIFO, (1, 5, 10)),
    "OLDEST_FIFO": (sql.OLDEST_FIFO, (1,)),
    "PRESENT_SEQS": (sql.PRESENT_SEQS, {"seqs": SEQS, "q": 1}),
}


@pytest.mark.parametrize("name", sorted(FIFO))
def test_fifo_statement_reads_groups_by_their_own_indexes(con, name):
    query, params = FIFO[name]
    details = [row[3] for row in con.execute("EXPLAIN QUERY PLAN " + query, params)]
    for d in details:
        scans = ("SCAN messages", "SCAN m ", "SCAN fifo_order", "SCAN o ", "SCAN fifo_dedup")
        assert not d.startswith(scans), (
            name,
            details,
        )
        if d.startswith(("SEARCH messages", "SEARCH m ")):
            # by seq, or the oldest first by the late index (retention, the oldest message)
            assert "PRIMARY KEY" in d or "messages_late" in d, (name, details)
        if d.startswith(("SEARCH fifo_order", "SEARCH o ")):
            # the queue alone is the whole queue: its group, at least, is named
            assert "grp=?" in d, (name, details)
        if d.startswith(("SEARCH fifo_groups", "SEARCH fifo_dedup", "SEARCH d ")):
            assert "INDEX" in d or "PRIMARY KEY" in d, (name, details)


def test_dedup_prune_reads_a_slice_from_the_front_in_rowid_order(con):
    """Forgetting expired deduplication ids reads at most its slice of the table's first
    rows, in rowid order (no sort, no index of window ends to keep at every send)."""
    details = [row[3] for row in con.execute("EXPLAIN QUERY PLAN " + sql.DEDUP_PRUNE, (5, 100))]
    assert not any("TEMP B-TREE" in d for d in details), details
    assert not any(d.startswith("SEARCH fifo_dedup USING INDEX") for d in details), details
    assert "ORDER BY id LIMIT ?2" in sql.DEDUP_PRUNE
