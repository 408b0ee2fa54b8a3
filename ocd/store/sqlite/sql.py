"""Every SQL statement of the SQLite backend, by name. Nothing else in ocd writes SQL."""

import functools

from ocd.store import migrations
from ocd.store.values import DEDUP_WINDOW_MS

APPLICATION_ID = 0x6F636421  # "ocd!": tells an ocd database from any other SQLite file

# Each file upgrades the schema by one version; PRAGMA user_version holds the current one.
MIGRATIONS: tuple[str, ...] = migrations.scripts("ocd.store.sqlite")

SELECT_QUEUES = """
SELECT key, account, name, queue_id, created_ms, modified_ms, delivery_delay_s, retention_s, paused,
       purged_ms, content_dedup, dedup_scope
FROM queues
"""

INSERT_QUEUE = """
INSERT INTO queues (account, name, queue_id, created_ms, modified_ms,
                    delivery_delay_s, retention_s, paused, content_dedup, dedup_scope)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (account, name) DO NOTHING
"""

SELECT_QUEUE = SELECT_QUEUES + " WHERE account = ? AND name = ?"

UPDATE_QUEUE = """
UPDATE queues SET name = ?, modified_ms = ?, delivery_delay_s = ?, retention_s = ?, paused = ?,
                  content_dedup = ?, dedup_scope = ?
WHERE key = ?
"""

DELETE_QUEUE = "DELETE FROM queues WHERE key = ?"

MARK_PURGED = "UPDATE queues SET purged_ms = ? WHERE key = ?"

QUEUE_EXTRAS = "SELECT sqs_attrs, tags FROM queues WHERE key = ?"
SET_QUEUE_EXTRAS = "UPDATE queues SET sqs_attrs = ?, tags = ? WHERE key = ?"

SELECT_CONSUMERS = """
SELECT key, queue, consumer_id, created_ms, dead_letter_queue, settings FROM consumers
"""

UPSERT_CONSUMER = """
INSERT INTO consumers (queue, consumer_id, created_ms, dead_letter_queue, settings)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (queue) DO UPDATE SET dead_letter_queue = excluded.dead_letter_queue,
                                  settings = excluded.settings
RETURNING key, consumer_id, created_ms
"""

DELETE_CONSUMER = "DELETE FROM consumers WHERE queue = ?"

GET_META = "SELECT value FROM meta WHERE key = ?"

PUT_META = "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)"

# A meta value that only grows: 8-byte big-endian integers compare as blobs (memcmp) in the
# order of their numbers, so the higher one stays.
RAISE_META = """
INSERT INTO meta (key, value) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE excluded.value > meta.value
"""
# The database's identity, made with it: the high-water mark (mark.py) names it.
DATABASE_ID_KEY = "database_id"
PUT_DATABASE_ID = "INSERT OR IGNORE INTO meta (key, value) VALUES ('database_id', randomblob(16))"

# The count of durable commits, bumped in every group commit that holds a send or another
# durable change, and copied to the mark after it. It lives in a row of sqlite_sequence,
# which SQLite lets ordinary statements change and which ignores rows that name no table:
# every send already dirties that page (messages.seq is AUTOINCREMENT), so the count costs
# no extra page per commit, where a row of meta would cost one more WAL frame per commit.
COMMITS_ROW = "ocd:commits"
GET_COMMITS = "SELECT seq FROM sqlite_sequence WHERE name = 'ocd:commits'"
START_COMMITS = "INSERT INTO sqlite_sequence (name, seq) VALUES ('ocd:commits', 0)"
SET_COMMITS = "UPDATE sqlite_sequence SET seq = ? WHERE name = 'ocd:commits'"

# FIFO queues (layout.py has the standard queues' statements): a FIFO message's changing
# state is its fifo_order row's (migration 0010), found from its row by (queue, grp, fseq).
# Ready FIFO messages in delivery order: the ready groups' runs, longest-waiting group first.
PEEK = """
SELECT m.seq, m.id, m.content_type, m.body, m.sent_ms, o.attempts, m.grp, m.fseq, m.dedup,
       m.attrs
FROM (SELECT grp FROM fifo_groups WHERE queue = :q AND ready_ms <= :now
      ORDER BY ready_ms LIMIT :n) AS g
CROSS JOIN fifo_order o ON o.queue = :q AND o.grp = g.grp AND o.visible_ms <= :now
JOIN messages m ON m.seq = o.seq
LIMIT :n
"""

# A fifo_order row is named by its key, (queue, grp, fseq), one row a statement: a list of
# keys (IN, a join) lets the planner walk the queue's rows instead.

# A queue's rows are in its range of seqs (layout.py): no index starts with the queue.
DELETE_QUEUE_MESSAGES = """
DELETE FROM messages WHERE seq >= (?1 << 40) AND seq < ((?1 + 1) << 40) AND +queue = ?1
"""

# A FIFO message's row counts while its fifo_order row names it (dead rows wait for the
# queue's cut).
_LIVE = """(m.grp IS NULL OR EXISTS (SELECT 1 FROM fifo_order o WHERE o.queue = m.queue
            AND o.grp = m.grp AND o.fseq = m.fseq AND o.seq = m.seq))"""

COUNT_BY_QUEUE = f"""
SELECT m.queue, count(*), coalesce(sum(m.size), 0), min(m.sent_ms) FROM messages m
WHERE {_LIVE} GROUP BY m.queue
"""

# Messages a crash left leased to a push dispatcher become ready now; their attempt stays
# counted, so a message that crashes the daemon cannot loop for ever.
RECOVER_PUSH_LEASES = """
UPDATE fifo_order SET visible_ms = ?, lease = NULL, lease_kind = NULL WHERE lease_kind = ?
RETURNING queue, grp
"""

# Every statement that names messages by seq also names their queue: a seq that has since
# moved to a dead-letter queue is out of reach of a stale lease on the old one. The unary
# "+" keeps SQLite from using a queue index for that test (it would walk the whole queue)
# instead of looking the seqs up by primary key.
RETRY = """
UPDATE fifo_order SET visible_ms = ?, lease = NULL, lease_kind = NULL
WHERE (queue, grp, fseq) = (SELECT queue, grp, fseq FROM messages WHERE seq = ? AND +queue = ?)
"""

DELETE_SEQS = "DELETE FROM messages WHERE +queue = ? AND seq IN ({marks}) RETURNING size, grp, fseq"
# The same for seqs that are a whole run, lo to hi (a batch acked whole): one range, its
# count and bytes read first (a step each, where RETURNING hands back a row a message).
COUNT_RUN = """
SELECT count(*), total(size) FROM messages WHERE seq >= ?2 AND seq <= ?3 AND +queue = ?1
"""
DELETE_RUN = "DELETE FROM messages WHERE seq >= ?2 AND seq <= ?3 AND +queue = ?1"

# A FIFO message's order row goes with it.
DELETE_ORDER = "DELETE FROM fifo_order WHERE queue = ? AND grp = ? AND fseq = ?"
# ... if it still names that message (an ack from what the writer knows, fifo.delete)
DELETE_ORDER_OF = "DELETE FROM fifo_order WHERE queue = ? AND grp = ? AND fseq = ? AND seq = ?"
# A claim's run of one group, acked whole: its order rows between its first and last
# sequence numbers whose seqs are no later than its highest (fifo.py, ``_delete_delivered``).
DELETE_ORDER_RUN = """
DELETE FROM fifo_order WHERE queue = ? AND grp = ? AND fseq BETWEEN ? AND ? AND seq <= ?
"""

# Handing back unfinished work (at shutdown, of one kind: ?2, or any) does not spend an
# attempt.
RELEASE_ORDER = """
UPDATE fifo_order
SET attempts = max(attempts - 1, 0), visible_ms = ?1, lease = NULL, lease_kind = NULL
WHERE queue = ?3 AND grp = ?4 AND fseq = ?5 AND lease IS NOT NULL
  AND (?2 IS NULL OR lease_kind = ?2)
"""

# A queue's ready band, from its start (?1 << 40) to its delayed band ((?1 << 40) +
# (1 << 39)).
_BAND = "seq >= (?1 << 40) AND seq < ((?1 << 40) + (1 << 39))"

# Retention (?2 the cutoff, ?3 at most): the late rows sent before it, by their index, and
# the rows in order before the first one sent at or after it (rows in order are in send
# time order).
EXPIRE = f"""
DELETE FROM messages WHERE seq IN (
  SELECT seq FROM messages WHERE queue = ?1 AND late AND sent_ms < ?2
  UNION ALL
  SELECT seq FROM messages WHERE seq >= (?1 << 40) AND seq < coalesce(
      (SELECT seq FROM messages WHERE {_BAND} AND NOT late AND sent_ms >= ?2 ORDER BY seq LIMIT 1),
      (?1 << 40) + (1 << 39))
    AND NOT late AND sent_ms < ?2
  LIMIT ?3)
RETURNING size, grp, seq
"""

# PUSH batches of a FIFO queue in flight now: a consumer's max_concurrency. A leased group
# is not ready, and its head is under the lease; lapsed leases (visible again) do not count.
PUSH_LEASES_HELD = """
SELECT count(DISTINCT o.lease) FROM fifo_groups g
CROSS JOIN fifo_order o ON o.queue = g.queue AND o.grp = g.grp
  AND o.fseq = (SELECT fseq FROM fifo_order WHERE queue = g.queue AND grp = g.grp
                ORDER BY fseq LIMIT 1)
WHERE g.queue = ?1 AND g.ready_ms > ?2 AND o.visible_ms > ?2 AND o.lease_kind = 1
"""

# A queue's oldest message: its ready band's first row (if in order, the oldest of those in
# order), or its oldest late row.
OLDEST = f"""
SELECT min(t) FROM (
  SELECT (SELECT sent_ms FROM messages WHERE {_BAND} ORDER BY seq LIMIT 1) AS t
  UNION ALL
  SELECT min(sent_ms) FROM messages WHERE queue = ?1 AND late)
"""
# A FIFO queue's oldest live message: its first live row from its cut (cursors.next: the rows
# before it are dead), or its oldest live late row (the late index walked past dead rows).
OLDEST_FIFO = f"""
SELECT min(t) FROM (
  SELECT (SELECT m.sent_ms FROM messages m
          WHERE m.seq >= (SELECT next FROM cursors WHERE queue = ?1)
            AND m.seq < (?1 << 40) + (1 << 39) AND {_LIVE}
          ORDER BY m.seq LIMIT 1) AS t
  UNION ALL
  SELECT (SELECT m.sent_ms FROM messages m INDEXED BY messages_late
          WHERE m.queue = ?1 AND m.late AND {_LIVE} ORDER BY m.sent_ms LIMIT 1))
"""

# Per FIFO queue: messages not ready now (retrying later, or leased), and of those the leased
# ones: those among the first BATCH_SPAN of each group that is not ready (a group's leased
# or retrying messages are at its head). A queue with a delivery delay has delayed messages
# at its groups' tails too: it is counted in full (NOT_READY_ALL).
NOT_READY = """
SELECT coalesce(sum((SELECT count(*) FROM (
         SELECT visible_ms FROM fifo_order o WHERE o.queue = g.queue AND o.grp = g.grp
         ORDER BY o.fseq LIMIT 1000) WHERE visible_ms > :now)), 0),
       coalesce(sum((SELECT count(*) FROM (
         SELECT visible_ms, lease FROM fifo_order o WHERE o.queue = g.queue AND o.grp = g.grp
         ORDER BY o.fseq LIMIT 1000) WHERE visible_ms > :now AND lease IS NOT NULL)), 0)
FROM fifo_groups g WHERE g.queue = :q AND g.ready_ms > :now
"""
NOT_READY_ALL = """
SELECT count(*), coalesce(sum(lease IS NOT NULL), 0) FROM fifo_order
WHERE queue = :q AND visible_ms > :now
"""

# ------------------------------------------------------------------ FIFO queues (fifo.py)

FIFO_LAST_SEQ = "SELECT fifo_seq FROM queues WHERE key = ?"
FIFO_SET_SEQ = "UPDATE queues SET fifo_seq = ? WHERE key = ?"

_DEDUP_ROWS = "INTO fifo_dedup (queue, scope, dedup, expires_ms, message_id, fseq) VALUES "


@functools.cache
def dedup_find(keys: int) -> str:
    """The deduplication ids, of ``keys`` (scope, id) pairs, still in their window: each
    pair looked up by primary key (CROSS JOIN keeps the pairs the outer loop)."""
    pairs = ",".join(["(?, ?)"] * keys)
    return (
        f"WITH k (scope, dedup) AS (VALUES {pairs}) "
        "SELECT d.scope, d.dedup, d.message_id, d.fseq FROM k CROSS JOIN fifo_dedup d "
        "ON d.queue = ? AND d.scope = k.scope AND d.dedup = k.dedup WHERE d.expires_ms > ?"
    )


@functools.cache
def dedup_put(rows: int) -> str:
    return "INSERT OR REPLACE " + _DEDUP_ROWS + ",".join(["(?, ?, ?, ?, ?, ?)"] * rows)


@functools.cache
def dedup_put_new(rows: int) -> str:
    """``dedup_put`` that takes the place only of ids past their window, so that the rows it
    writes say whether any id was still in its window, for ids stored under consecutive
    sequence numbers: ``?1`` the queue, ``?2`` the first sequence number, ``?3`` now, then
    four parameters an id (scope, id, the message's send time, its message id); its window
    and sequence number follow from them."""
    values = ",".join(
        f"(?1, ?{p}, ?{p + 1}, ?{p + 2} + {DEDUP_WINDOW_MS}, ?{p + 3}, ?2 + {k})"
        for k, p in ((k, 4 + 4 * k) for k in range(rows))
    )
    return (
        "INSERT "
        + _DEDUP_ROWS
        + values
        + " ON CONFLICT (queue, scope, dedup) DO UPDATE SET expires_ms = excluded.expires_ms, "
        "message_id = excluded.message_id, fseq = excluded.fseq "
        "WHERE fifo_dedup.expires_ms <= ?3"
    )


# The ids past their window (?1 now) among the first ?2 stored: rowid order is nearly the
# order windows close in (fifo.prune_dedup).
DEDUP_PRUNE = """
DELETE FROM fifo_dedup WHERE id IN (
  SELECT id FROM (SELECT id, expires_ms FROM fifo_dedup ORDER BY id LIMIT ?2)
  WHERE expires_ms <= ?1)
"""
DEDUP_CLEAR = "DELETE FROM fifo_dedup WHERE queue = ?"

# A FIFO message's row, written once: its changing state is its fifo_order row's.
_INSERT_FIFO = (
    "INSERT INTO messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms, grp, "
    "dedup, fseq, attrs, late) VALUES "
)


@functools.cache
def insert_fifo(rows: int) -> str:
    return _INSERT_FIFO + ",".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * rows)


@functools.cache
def insert_order(rows: int) -> str:
    """The fifo_order rows of new messages: queue, group, fseq, seq, visible_ms each."""
    values = ",".join(["(?, ?, ?, ?, ?, 0)"] * rows)
    return f"INSERT INTO fifo_order (queue, grp, fseq, seq, visible_ms, attempts) VALUES {values}"


@functools.cache
def insert_fifo_in_order(rows: int) -> str:
    """The rows of FIFO messages visible at their send, in order and without attributes,
    under consecutive seqs and sequence numbers: ``?1`` the queue, ``?2`` the first seq,
    ``?3`` the first sequence number, then six parameters a message (id, content type, body,
    send time, group, deduplication id). Size, visibility and lateness follow from them."""
    values = ",".join(
        f"(?2 + {k}, ?1, ?{p}, ?{p + 1}, ?{p + 2}, length(?{p + 2}), ?{p + 3}, ?{p + 3}, "
        f"?{p + 4}, ?{p + 5}, ?3 + {k}, NULL, 0)"
        for k, p in ((k, 4 + 6 * k) for k in range(rows))
    )
    return _INSERT_FIFO + values


@functools.cache
def insert_order_in_order(rows: int) -> str:
    """``insert_order`` of those messages: ``?1`` the queue, ``?2`` the first seq, ``?3`` the
    first sequence number, then two parameters a message (group, send time)."""
    values = ",".join(
        f"(?1, ?{p}, ?3 + {k}, ?2 + {k}, ?{p + 1}, 0)"
        for k, p in ((k, 4 + 2 * k) for k in range(rows))
    )
    return f"INSERT INTO fifo_order (queue, grp, fseq, seq, visible_ms, attempts) VALUES {values}"


# A group that had no messages starts with its first message as its head.
@functools.cache
def add_groups(rows: int) -> str:
    """The rows of groups that had none (a group with messages keeps its row): queue,
    group, when its head is visible and its head's seq."""
    values = ",".join(["(?, ?, ?, ?)"] * rows)
    return f"INSERT OR IGNORE INTO fifo_groups (queue, grp, ready_ms, head_seq) VALUES {values}"


GROUPS_CLEAR = "DELETE FROM fifo_groups WHERE queue = ?"
ORDER_CLEAR = "DELETE FROM fifo_order WHERE queue = ?"

# The groups whose head is ready, longest-waiting first: a range of fifo_groups_ready.
READY_GROUPS = """
SELECT grp FROM fifo_groups WHERE queue = ? AND ready_ms <= ? ORDER BY ready_ms LIMIT ?
"""


@functools.cache
def group_runs(groups: int) -> str:
    """The first messages of ``groups`` groups in one statement: per group (numbered in the
    statement, so the rows say whose they are) a range of fifo_order from its head, at most
    ``?2`` of them. Parameters: queue, the most per group, then the groups. Not ordered as a
    whole (the caller sorts the rows): an ``ORDER BY`` over the compound made SQLite sort
    each group's rows in a temporary B-tree of their own, 40 % of the statement's time."""
    one = (
        "SELECT * FROM (SELECT {i}, seq, visible_ms, fseq, attempts, first_received_ms "
        "FROM fifo_order "
        "WHERE queue = ?1 AND grp = ?{g} ORDER BY fseq LIMIT ?2)"
    )
    parts = (one.format(i=i, g=3 + i) for i in range(groups))
    return " UNION ALL ".join(parts)


@functools.cache
def set_groups(groups: int) -> str:
    """Leased: ``?2`` is when the groups' heads are visible again. Parameters: queue, that
    time, then the groups."""
    return (
        "UPDATE fifo_groups SET ready_ms = ?2 "
        f"WHERE queue = ?1 AND grp IN ({','.join(['?'] * groups)})"
    )


@functools.cache
def refresh_groups(groups: int) -> tuple[str, str]:
    """Make the rows of ``groups`` groups true in two statements: drop them all, then put
    back those with messages, each with its head's visibility (one lookup of fifo_order
    per group). Parameters: queue, then the groups, for each statement."""
    marks = ",".join(["?"] * groups)
    rows = ",".join(["(?)"] * groups)
    return (
        f"DELETE FROM fifo_groups WHERE queue = ?1 AND grp IN ({marks})",
        "INSERT INTO fifo_groups (queue, grp, ready_ms, head_seq) "
        f"SELECT ?1, g.column1, o.visible_ms, o.seq FROM (VALUES {rows}) g "
        "JOIN fifo_order o ON o.queue = ?1 AND o.grp = g.column1 AND o.fseq = "
        "(SELECT min(fseq) FROM fifo_order WHERE queue = ?1 AND grp = g.column1)",
    )


# Messages of a group after a sequence number: the rest of a batch is among the first few.
GROUP_AFTER = """
SELECT seq, lease FROM fifo_order WHERE queue = ? AND grp = ? AND fseq > ? ORDER BY fseq LIMIT ?
"""


# A claim leases the order rows of its groups' runs; the message rows themselves are only
# read.
@functools.cache
def claim_runs(runs: int) -> str:
    """Lease runs of groups' order rows in one statement: ``?1`` when they are visible
    again, ``?2`` the lease, ``?3`` its kind, ``?4`` now (the first receive of rows never
    received), ``?5`` the queue, then three parameters a run (group, first and last
    sequence number). The runs drive the join: each is a range of fifo_order's key."""
    values = ",".join(f"(?{p}, ?{p + 1}, ?{p + 2})" for p in range(6, 6 + 3 * runs, 3))
    return (
        "UPDATE fifo_order SET attempts = attempts + 1, visible_ms = ?1, lease = ?2, "
        "lease_kind = ?3, first_received_ms = coalesce(first_received_ms, ?4) "
        f"FROM (VALUES {values}) AS r "
        "WHERE fifo_order.queue = ?5 AND fifo_order.grp = r.column1 "
        "AND fifo_order.fseq BETWEEN r.column2 AND r.column3"
    )


CLAIMED_ROWS = """
SELECT seq, id, content_type, body, sent_ms, grp, fseq, dedup, attrs, size FROM messages
WHERE seq IN (SELECT value FROM json_each(?))
"""

# The live messages among seqs of a queue, with their group, place and lease; and their
# sizes.
_FIFO_LIVE = """
FROM messages m
LEFT JOIN fifo_order o ON o.queue = m.queue AND o.grp = m.grp AND o.fseq = m.fseq
WHERE +m.queue = ? AND m.seq IN ({marks}) AND (m.grp IS NULL OR o.seq = m.seq)
"""
FIFO_INFO = "SELECT m.seq, m.grp, m.fseq, o.lease" + _FIFO_LIVE
FIFO_LIVE = "SELECT m.seq, m.grp, m.fseq, m.size" + _FIFO_LIVE

# Where a FIFO queue's cut is, the end of its band's numbers, and the lowest head of its
# groups: every FIFO row below that is dead.
FIFO_CUT_AT = """
SELECT c.next, c.tail, (SELECT min(head_seq) FROM fifo_groups WHERE queue = ?1), c.compact_at
FROM cursors c WHERE c.queue = ?1
"""
CUT_FIFO = "DELETE FROM messages WHERE seq >= ? AND seq < ? AND +queue = ? AND grp IS NOT NULL"

# Compaction (fifo.py): the group whose head holds the cut, its rows, copied to the tail of
# the band in the order given (a JSON array of seqs from :base on), repointed, old rows gone.
PINNING_GROUP = "SELECT grp FROM fifo_groups WHERE queue = ? AND head_seq = ? LIMIT 1"
GROUP_ROWS = (
    "SELECT fseq, seq, lease FROM fifo_order WHERE queue = ? AND grp = ? ORDER BY fseq LIMIT ?"
)
COPY_ROWS = """
INSERT INTO messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms, grp, dedup,
                      fseq, attrs)
SELECT :base + j.key, m.queue, m.id, m.content_type, m.body, m.size, m.sent_ms, m.visible_ms,
       m.grp, m.dedup, m.fseq, m.attrs
FROM json_each(:seqs) j JOIN messages m ON m.seq = j.value
"""
COMPACT_TRIED = "UPDATE cursors SET compact_at = ? WHERE queue = ?"
REPOINT_ORDER = "UPDATE fifo_order SET seq = ? WHERE queue = ? AND grp = ? AND fseq = ?"
DELETE_ROWS = "DELETE FROM messages WHERE seq IN (SELECT value FROM json_each(?))"

# Same id, timestamp and group in the dead-letter queue, under its next sequence number:
# its order row goes (DELETE_ORDER), the row changes queue, and a new order row starts it
# there, ready at once, attempts from 0.
MOVE_FIFO = """
INSERT INTO messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms, grp, dedup,
                      fseq, attrs)
SELECT :new, :dlq, id, content_type, body, size, sent_ms, :now, grp, dedup, :fseq, attrs
FROM messages WHERE seq = :seq AND +queue = :src
RETURNING size, sent_ms, grp
"""

# Ready messages counted group by group (CROSS JOIN: the ready groups are the outer loop,
# each walked in fifo_order), so a deep group waiting behind its head is never scanned.
READY_FIFO = """
SELECT
  (SELECT count(*) FROM (
     SELECT 1 FROM (SELECT grp FROM fifo_groups WHERE queue = :q AND ready_ms <= :now
                    ORDER BY ready_ms LIMIT :n) AS g
     CROSS JOIN fifo_order AS o
     WHERE o.queue = :q AND o.grp = g.grp AND o.visible_ms <= :now
     LIMIT :n)),
  (SELECT min(ready_ms) FROM fifo_groups WHERE queue = :q AND ready_ms <= :now),
  (SELECT min(ready_ms) FROM fifo_groups WHERE queue = :q AND ready_ms > :now)
"""

# The live messages of a FIFO queue sent before ?2 (retention), at most ?3: late ones by
# their index, and those in order from the cut up to the first sent at or after ?2.
EXPIRED_FIFO = f"""
SELECT m.seq FROM messages m INDEXED BY messages_late
WHERE m.queue = ?1 AND m.late AND m.sent_ms < ?2 AND {_LIVE}
UNION ALL
SELECT m.seq FROM messages m
WHERE m.seq >= (SELECT next FROM cursors WHERE queue = ?1) AND m.seq < coalesce(
    (SELECT seq FROM messages WHERE {_BAND} AND NOT late AND sent_ms >= ?2 ORDER BY seq LIMIT 1),
    (?1 << 40) + (1 << 39))
  AND NOT m.late AND m.sent_ms < ?2 AND {_LIVE}
LIMIT ?3
"""

# ------------------------------------------------------------------ cron triggers

CLAIM_CRON_TICK = """
INSERT INTO cron_ticks (schedule, due_ms, node) VALUES (?, ?, ?)
ON CONFLICT (schedule) DO UPDATE SET due_ms = excluded.due_ms, node = excluded.node
WHERE cron_ticks.due_ms < excluded.due_ms
RETURNING schedule
"""

CRON_LAST_TICKS = "SELECT schedule, due_ms FROM cron_ticks"

# ---------------------------------------------------------------- browsing (the dashboard)

# ifnull: SQLite's substr of an empty blob is NULL, not an empty blob.
_BROWSED = (
    "seq, id, content_type, ifnull(substr(body, 1, :b), x''), size, sent_ms, visible_ms, "
    "attempts, lease IS NOT NULL AND visible_ms > :now, grp, fseq"
)
_STATES = {
    "any": "",
    "ready": " AND visible_ms <= :now",
    "delayed": " AND visible_ms > :now AND lease IS NULL",
    "inflight": " AND visible_ms > :now AND lease IS NOT NULL",
}


# Where a cursor falls among a queue's rows in order: for each target k (0: the
# range's start :from, 1: its end :to, 2: the page's cursor), the first seq of the ready band
# [:lo, :end) of a row in order whose (sent_ms, seq) is at least the target's (:end if none).
# A binary search by primary key probes (rows in order are in send time order), the three
# side by side; each probe walks past the late rows it meets.
_SEEK = """
seek (k, a, b, h, ms, sq) AS (
  SELECT 0, :lo, :end, :end, :from, -1
  UNION ALL SELECT 1, :lo, :end, :end, :to + 1, -1
  UNION ALL SELECT 2, :lo, :end, :end, :cs, :cq + {after}
  UNION ALL
  SELECT s.k,
         CASE WHEN p.seq IS NOT NULL AND (p.sent_ms, p.seq) < (s.ms, s.sq) THEN p.seq + 1
              ELSE s.a END,
         CASE WHEN p.seq IS NOT NULL AND (p.sent_ms, p.seq) < (s.ms, s.sq) THEN s.b
              ELSE s.a + (s.b - s.a) / 2 END,
         CASE WHEN p.seq IS NOT NULL AND (p.sent_ms, p.seq) >= (s.ms, s.sq) THEN p.seq
              ELSE s.h END,
         s.ms, s.sq
  FROM seek s LEFT JOIN messages p ON p.seq = (
    SELECT min(x.seq) FROM messages x
    WHERE x.seq >= s.a + (s.b - s.a) / 2 AND x.seq < s.b AND NOT x.late)
  WHERE s.a < s.b),
found (k, at) AS (SELECT k, h FROM seek WHERE a >= b)
"""


@functools.cache
def browse(newest_first: bool, state: str) -> str:
    """A keyset page of a queue, two pages in one statement (one snapshot) for the caller
    to merge: its late rows over their (queue, sent_ms) index, whose entries end with the
    rowid (seq), so the (sent_ms, seq) row value walks that index from the cursor; and its
    rows in order, a run of the ready band between the seqs ``_SEEK`` finds. Parameters
    :q :now :b :cs :cq :from :to :att :n :lo :end."""
    op, order = ("<", "DESC") if newest_first else (">", "ASC")
    if newest_first:  # before the cursor
        lo, hi = "(SELECT at FROM found WHERE k = 0)", "(SELECT min(at) FROM found WHERE k > 0)"
    else:  # after it
        lo, hi = "(SELECT max(at) FROM found WHERE k <> 1)", "(SELECT at FROM found WHERE k = 1)"
    filters = f"attempts >= :att{_STATES[state]}"
    return (
        "WITH RECURSIVE "
        + _SEEK.format(after=0 if newest_first else 1)
        + f"SELECT * FROM (SELECT {_BROWSED} FROM message_states "
        f"WHERE queue = :q AND late AND (sent_ms, seq) {op} (:cs, :cq) "
        f"AND sent_ms BETWEEN :from AND :to AND {filters} "
        f"ORDER BY sent_ms {order}, seq {order} LIMIT :n) "
        "UNION ALL "
        f"SELECT * FROM (SELECT {_BROWSED} FROM message_states "
        f"WHERE seq >= {lo} AND seq < {hi} AND NOT late AND {filters} "
        f"ORDER BY seq {order} LIMIT :n)"
    )


MESSAGE_BY_SEQ = f"SELECT {_BROWSED} FROM message_states WHERE seq = :seq AND queue = :q"

# Which of the seqs (a JSON array: one parameter however many) the queue holds.
PRESENT_SEQS = f"""
SELECT m.seq FROM messages m
WHERE m.seq IN (SELECT value FROM json_each(:seqs)) AND +m.queue = :q AND {_LIVE}
"""

# A search: the newest :scan messages of a queue (of those in order, the ready band from its
# tail down; of the late ones, their index from the newest down), each row read once and
# tested there, and the newest :n matches among them, as readers see them.
_HIT = "(:needle IS NULL OR instr(body, :needle) > 0) AND (:id IS NULL OR id = :id)"
SEARCH = f"""
WITH w (seq, sent_ms, hit) AS (
  SELECT seq, sent_ms, hit FROM (
    SELECT * FROM (SELECT seq, sent_ms, {_HIT} AS hit FROM messages
                   WHERE seq >= :lo AND seq < :end AND NOT late ORDER BY seq DESC LIMIT :scan)
    UNION ALL
    SELECT * FROM (SELECT seq, sent_ms, {_HIT} AS hit FROM messages WHERE queue = :q AND late
                   ORDER BY sent_ms DESC, seq DESC LIMIT :scan))
  ORDER BY sent_ms DESC, seq DESC LIMIT :scan)
SELECT {_BROWSED} FROM message_states WHERE queue = :q AND seq IN (
  SELECT seq FROM w WHERE hit ORDER BY sent_ms DESC, seq DESC LIMIT :n)
ORDER BY sent_ms DESC, seq DESC
"""

# ------------------------------------------------------------------ bulk move tasks

MOVE_TASK_COLUMNS = """
task_id, account, source_id, source, destination_id, destination, total, started_ms, done,
state, error, finished_ms, rate, bound_sent, bound_seq, cursor_sent, cursor_seq, spec, node
"""

INSERT_MOVE_TASK = f"""
INSERT INTO move_tasks ({MOVE_TASK_COLUMNS})
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
WHERE NOT EXISTS (SELECT 1 FROM move_tasks
                  WHERE source_id = ?3 AND ?5 IS NOT NULL AND destination_id IS NOT NULL
                    AND state IN ('running', 'cancelling'))
RETURNING task_id
"""

FORGET_MOVE_TASKS = "DELETE FROM move_tasks WHERE finished_ms IS NOT NULL AND finished_ms < ?"

SELECT_MOVE_TASKS = f"SELECT {MOVE_TASK_COLUMNS} FROM move_tasks ORDER BY started_ms DESC, task_id"

MOVE_TASK_PROGRESS = f"""
UPDATE move_tasks SET done = done + ?, cursor_sent = coalesce(?, cursor_sent),
                      cursor_seq = coalesce(?, cursor_seq)
WHERE task_id = ?
RETURNING {MOVE_TASK_COLUMNS}
"""

SET_MOVE_TASK_STATE = f"""
UPDATE move_tasks SET state = ?, error = coalesce(?, error), finished_ms = ?
WHERE task_id = ? AND state IN ({{marks}})
RETURNING {MOVE_TASK_COLUMNS}
"""

COUNT_ORPHAN_MOVE_TASKS = """
SELECT count(*) FROM move_tasks WHERE state IN ('running', 'cancelling') AND node <> ?
"""

ADOPT_MOVE_TASKS = f"""
UPDATE move_tasks SET node = ? WHERE state IN ('running', 'cancelling') AND node <> ?
RETURNING {MOVE_TASK_COLUMNS}
"""

# ---------------------------------------------------------------- KV namespaces

KV_GET = """
SELECT value, expires_ms, metadata FROM kv
WHERE account = ? AND namespace = ? AND key = ? AND (expires_ms IS NULL OR expires_ms > ?)
"""
KV_PUT = """
INSERT INTO kv (account, namespace, key, value, expires_ms, metadata) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (account, namespace, key) DO UPDATE SET
  value = excluded.value, expires_ms = excluded.expires_ms, metadata = excluded.metadata
"""
KV_DELETE = "DELETE FROM kv WHERE account = ? AND namespace = ? AND key = ?"
# account, namespace, lower bound (inclusive), after (exclusive), upper bound, now, limit
KV_LIST = """
SELECT key, expires_ms, metadata FROM kv
WHERE account = ? AND namespace = ? AND key >= ? AND key > ? AND key < ?
  AND (expires_ms IS NULL OR expires_ms > ?)
ORDER BY key LIMIT ?
"""
KV_LIST_UNBOUNDED = """
SELECT key, expires_ms, metadata FROM kv
WHERE account = ? AND namespace = ? AND key >= ? AND key > ?
  AND (expires_ms IS NULL OR expires_ms > ?)
ORDER BY key LIMIT ?
"""
KV_EXPIRE = """
DELETE FROM kv WHERE rowid IN (
  SELECT rowid FROM kv WHERE expires_ms IS NOT NULL AND expires_ms <= ? LIMIT ?
)
"""

KV_ANY_EXPIRED = "SELECT 1 FROM kv WHERE expires_ms IS NOT NULL AND expires_ms <= ? LIMIT 1"

# ------------------------------------------------------------- standard queues as a log (layout.py)

# A queue's cursor row: the first unclaimed seq of its ready band, and the numbers each band
# has given (the new ones are RETURNed: a send reserves its seqs in one statement).
TAKE_SEQS = "UPDATE cursors SET tail = tail + ? WHERE queue = ? RETURNING tail"
# A send's seqs: the floor raised to its greatest send time, and what it was (SQLite's SET
# reads the row as it was).
TAKE_SENT_SEQS = """
UPDATE cursors SET tail = tail + ?1, was_ms = floor_ms, floor_ms = max(floor_ms, ?2)
WHERE queue = ?3 RETURNING tail, was_ms
"""
# Rows sent before the floor came in another way (delayed, moved in): later sends must not
# be in order before them.
RAISE_FLOOR = "UPDATE cursors SET floor_ms = max(floor_ms, ?1) WHERE queue = ?2"
TAKE_DELAYED_SEQS = "UPDATE cursors SET dtail = dtail + ? WHERE queue = ? RETURNING dtail"
NEW_CURSOR = "INSERT OR IGNORE INTO cursors (queue, next, tail, dtail) VALUES (?, ?, 0, 0)"
CURSOR = "SELECT next FROM cursors WHERE queue = ?"
SET_CURSOR = "UPDATE cursors SET next = ? WHERE queue = ?"

_INSERT_LOG = (
    "INSERT INTO messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms, attrs, "
    "late) "
)


@functools.cache
def insert_log(rows: int) -> str:
    """INSERT of ``rows`` messages under the seqs given, ten parameters each."""
    return _INSERT_LOG + "VALUES " + ",".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * rows)


@functools.cache
def insert_plain(rows: int) -> str:
    """INSERT of ``rows`` plain messages (visible at their send, in order, no attributes)
    under consecutive seqs: ``?1`` the queue, ``?2`` the first seq, then four parameters a
    message (id, content type, body, send time). The size, visibility and lateness follow
    from them: a message costs SQLite four bindings, not ten."""
    values = ",".join(
        f"(?2 + {k}, ?1, ?{p}, ?{p + 1}, ?{p + 2}, length(?{p + 2}), ?{p + 3}, ?{p + 3}, NULL, 0)"
        for k, p in ((k, 3 + 4 * k) for k in range(rows))
    )
    return _INSERT_LOG + "VALUES " + values


HOLD_NEW = "INSERT INTO held (seq, queue, until_ms, attempts) VALUES (?, ?, ?, 0)"

# The next run of the ready band: what a claim takes, as it goes out under the lease: one
# more attempt than the row says, and this claim's time (?4) as the first receive if none.
LOG_RUN = """
SELECT seq, id, content_type, body, sent_ms, attempts + 1, attrs, coalesce(first_received_ms, ?4)
FROM messages WHERE seq >= ?1 AND seq < ?2 ORDER BY seq LIMIT ?3
"""

INSERT_LEASE = """
INSERT INTO leases (lease, queue, lo, hi, kind, claimed_ms, deadline_ms)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""

LOG_PUSH_LEASES_HELD = """
SELECT count(*) FROM leases WHERE queue = ? AND deadline_ms > ? AND kind = 1
"""

LAPSED_LEASES = """
SELECT lease, lo, hi, claimed_ms, deadline_ms FROM leases
WHERE queue = ? AND deadline_ms <= ? ORDER BY deadline_ms LIMIT ?
"""
LEASES_OF_KIND = "SELECT lease, queue, lo, hi, claimed_ms FROM leases WHERE kind = ?"
DELETE_LEASE = "DELETE FROM leases WHERE lease = ?"

# A lease's messages still under it: not settled, not held apart.
_UNDER_LEASE = """
FROM messages m WHERE m.seq BETWEEN :lo AND :hi AND +m.queue = :q
  AND NOT EXISTS (SELECT 1 FROM held h WHERE h.seq = m.seq)"""

LEASE_SURVIVORS = "SELECT m.seq " + _UNDER_LEASE + " ORDER BY m.seq"

# Leases of a queue that a settle may have emptied, dropped.
DROP_EMPTY_LEASES = """
DELETE FROM leases WHERE queue = :q AND hi >= :min AND lo <= :max AND NOT EXISTS (
  SELECT 1 FROM messages m WHERE m.seq BETWEEN leases.lo AND leases.hi AND +m.queue = :q
    AND NOT EXISTS (SELECT 1 FROM held h WHERE h.seq = m.seq))
"""

# Appending messages anew (a JSON array of seqs: :seqs) under the seqs from :base on, in
# the order given, into queue :dest; :add attempts counted, or, with :reset, attempts and
# the first receive time start again (a move to another queue).
REAPPEND = """
INSERT INTO messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms, attempts,
                      first_received_ms, attrs)
SELECT :base + j.key, :dest, m.id, m.content_type, m.body, m.size, m.sent_ms, :vis,
       CASE WHEN :reset THEN 0 ELSE m.attempts + :add END,
       CASE WHEN :reset THEN NULL ELSE coalesce(m.first_received_ms, :first) END, m.attrs
FROM json_each(:seqs) j JOIN messages m ON m.seq = j.value AND +m.queue = :src
RETURNING size, sent_ms
"""

DELETE_LOG_SEQS = """
DELETE FROM messages WHERE seq IN (SELECT value FROM json_each(:seqs)) AND +queue = :src
"""
DELETE_HELD_SEQS = "DELETE FROM held WHERE seq IN (SELECT value FROM json_each(?))"
ANY_HELD = "SELECT 1 FROM held WHERE queue = ? LIMIT 1"

# The lease whose run could hold a seq (runs never overlap): (lo, kind, claimed_ms), or none.
LEASE_OF = """
SELECT lo, kind, claimed_ms FROM leases WHERE queue = ? AND hi >= ? ORDER BY hi LIMIT 1
"""

# Held messages that are due: appended anew with the attempts and first receive time kept
# in their held row.
DUE_HELD = """
SELECT seq FROM held WHERE queue = ? AND until_ms <= ? ORDER BY until_ms, seq LIMIT ?
"""
PROMOTE_HELD = """
INSERT INTO messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms, attempts,
                      first_received_ms, attrs)
SELECT :base + j.key, m.queue, m.id, m.content_type, m.body, m.size, m.sent_ms, h.until_ms,
       h.attempts, h.first_received_ms, m.attrs
FROM json_each(:seqs) j JOIN held h ON h.seq = j.value JOIN messages m ON m.seq = h.seq
"""

# A claimed message held apart until :until (a retry, a longer visibility): it keeps its
# seq, so the lease id that named it still does; its attempt stays counted. Only messages
# the queue's cursor has passed (claimed ones) can be held this way.
HOLD = """
INSERT INTO held (seq, queue, until_ms, attempts, first_received_ms)
SELECT m.seq, m.queue, :until, m.attempts + 1,
       coalesce(m.first_received_ms,
                (SELECT claimed_ms FROM leases WHERE queue = :q AND hi >= m.seq
                 ORDER BY hi LIMIT 1), :now)
FROM messages m WHERE m.seq = :seq AND +m.queue = :q AND m.seq < :next
ON CONFLICT (seq) DO UPDATE SET until_ms = excluded.until_ms
"""

# Ready now, for a queue: the ready band from the cursor, held messages that are due, and
# the messages of lapsed leases; when the longest-waiting became ready, and the next time
# one becomes ready.
READY_LOG = """
WITH c (next) AS (SELECT coalesce((SELECT next FROM cursors WHERE queue = :q), :start))
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM messages WHERE seq >= (SELECT next FROM c)
                         AND seq < :end LIMIT :n))
  + (SELECT count(*) FROM (SELECT 1 FROM held WHERE queue = :q AND until_ms <= :now LIMIT :n))
  + (SELECT count(*) FROM (SELECT 1 FROM leases l JOIN messages m
                           ON m.seq BETWEEN l.lo AND l.hi AND +m.queue = :q
                           WHERE l.queue = :q AND l.deadline_ms <= :now LIMIT :n)),
  (SELECT visible_ms FROM messages WHERE seq >= (SELECT next FROM c) AND seq < :end
   ORDER BY seq LIMIT 1),
  (SELECT min(until_ms) FROM held WHERE queue = :q AND until_ms <= :now),
  (SELECT min(deadline_ms) FROM leases WHERE queue = :q AND deadline_ms <= :now),
  (SELECT min(until_ms) FROM held WHERE queue = :q AND until_ms > :now),
  (SELECT min(deadline_ms) FROM leases WHERE queue = :q AND deadline_ms > :now)
"""

# Ready now without leasing: the ready band from the cursor, the messages of lapsed leases
# and the held ones that are due, as readers see them (message_states).
_PEEKED = (
    "s.seq, s.id, s.content_type, s.body, s.sent_ms, s.attempts, s.grp, s.fseq, s.dedup, s.attrs"
)
PEEK_LOG = f"""
SELECT * FROM (
  SELECT * FROM (SELECT {_PEEKED}, s.visible_ms FROM message_states s
                 WHERE s.seq >= (SELECT next FROM cursors WHERE queue = :q) AND s.seq < :end
                 ORDER BY s.seq LIMIT :n)
  UNION ALL
  SELECT * FROM (SELECT {_PEEKED}, s.visible_ms FROM leases l JOIN message_states s
                 ON s.seq BETWEEN l.lo AND l.hi AND s.queue = :q
                 WHERE l.queue = :q AND l.deadline_ms <= :now AND s.visible_ms <= :now LIMIT :n)
  UNION ALL
  SELECT * FROM (SELECT {_PEEKED}, s.visible_ms FROM held h JOIN message_states s ON s.seq = h.seq
                 WHERE h.queue = :q AND h.until_ms <= :now LIMIT :n)
) ORDER BY visible_ms, seq LIMIT :n
"""

# Not ready now: held until later, or under a live lease; of those the leased ones.
NOT_READY_LOG = """
SELECT (SELECT count(*) FROM held WHERE queue = :q AND until_ms > :now),
       (SELECT count(*) FROM leases l JOIN messages m ON m.seq BETWEEN l.lo AND l.hi
        WHERE l.queue = :q AND l.deadline_ms > :now AND +m.queue = :q
          AND NOT EXISTS (SELECT 1 FROM held h WHERE h.seq = m.seq))
"""

DELETE_QUEUE_LEASES = "DELETE FROM leases WHERE queue = ?"
DELETE_QUEUE_HELD = "DELETE FROM held WHERE queue = ?"
