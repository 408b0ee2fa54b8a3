"""Every SQL statement of the PostgreSQL backend, by name, but for the FIFO queues' ones
(``fifo_sql.py``) and the schema's migrations (``migrations/``). Nothing else in ocd writes
SQL.

Tables carry an ``ocd_`` prefix so that ocd can share a database (or schema) with others.
Message statements name their queue and look messages up by primary key (a standard queue's
rows are the seqs ``queue << 40`` on) or by a bounded range of the late rows' ``(queue,
sent_ms, seq)`` (``migrations/0015_late.sql``); ``tests/store/test_postgres.py``
pins those plans, on a table with statistics and on one never analysed (a new database, or
one that filled faster than autovacuum ran). Statements that name messages by seq test
their queue as ``queue + 0``, which no index serves, so that the planner looks the seqs up
by primary key instead of walking the queue's index (as SQLite's unary ``+`` does).
"""

import functools

from ocd.store import migrations

SCHEMA_LOCK = 0x6F636421  # advisory lock held while migrating: nodes starting together
CLAIM_LOCK = 0x6F636422  # advisory lock class for capped (max_concurrency) claims

SCHEMA_TABLE = """
CREATE TABLE IF NOT EXISTS ocd_schema (version integer NOT NULL)
"""
SCHEMA_VERSION = "SELECT version FROM ocd_schema"
SCHEMA_INIT = "INSERT INTO ocd_schema (version) VALUES (0)"
SCHEMA_SET = "UPDATE ocd_schema SET version = $1"

# Each entry upgrades the schema by one version: ``migrations/NNNN_name.sql``, frozen once
# released (``ocd.store.migrations``).
MIGRATIONS: tuple[str, ...] = migrations.scripts("ocd.store.postgres")

CATALOGUE_CHANNEL = "ocd_catalogue"


def queue_channel(key: int) -> str:
    """The channel a commit that may make messages of queue ``key`` ready notifies."""
    return f"ocd_q_{key}"


# ------------------------------------------------------------------ nodes

REGISTER_NODE = """
INSERT INTO ocd_nodes (node_id, host, pid) VALUES ($1, $2, $3)
ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now()
"""
HEARTBEAT = "UPDATE ocd_nodes SET heartbeat_at = now() WHERE node_id = $1"
FORGET_NODE = "DELETE FROM ocd_nodes WHERE node_id = $1"

# PUSH leases of nodes whose heartbeat lapsed become ready now; the attempt their claim
# spent stays spent, so a message that kills its nodes cannot loop for ever.
REAP_NODES = """
WITH dead AS (
  DELETE FROM ocd_nodes
  WHERE heartbeat_at < now() - make_interval(secs => $1) AND node_id <> $3
  RETURNING node_id)
UPDATE ocd_fifo_order SET visible_ms = $2, lease = NULL, lease_kind = NULL, owner = NULL
WHERE EXISTS (SELECT 1 FROM dead) AND owner IN (SELECT node_id FROM dead)
RETURNING queue, grp
"""
# (EXISTS is a one-time filter: with no node reaped, the order rows, which have no index on
# owner, are not walked at all.)
# A node's own PUSH leases, returned at its clean shutdown (its dispatchers have released
# what they could; this is the rest) or when it finds it was taken for dead.
RETURN_OWN = """
UPDATE ocd_fifo_order SET visible_ms = $2, lease = NULL, lease_kind = NULL, owner = NULL
WHERE owner = $1
RETURNING queue, grp
"""

# Claims whose reply was lost with the connection (it may have committed): their messages,
# if the claim did commit, go back at once and with their attempt given back.
RETURN_DOUBTFUL = """
UPDATE ocd_fifo_order
SET attempts = greatest(attempts - 1, 0), visible_ms = $3, lease = NULL, lease_kind = NULL,
    owner = NULL
WHERE owner = $1 AND lease = ANY($2::bigint[])
RETURNING queue, grp
"""

# ------------------------------------------------------------------ queues

SELECT_QUEUES = """
SELECT key, account, name, queue_id, created_ms, modified_ms, delivery_delay_s, retention_s,
       paused, purged_ms, content_dedup, dedup_scope
FROM ocd_queues
"""
SELECT_QUEUE = SELECT_QUEUES + " WHERE account = $1 AND name = $2"

INSERT_QUEUE = """
INSERT INTO ocd_queues (account, name, queue_id, created_ms, modified_ms,
                        delivery_delay_s, retention_s, paused, content_dedup, dedup_scope)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (account, name) DO NOTHING
RETURNING key, account, name, queue_id, created_ms, modified_ms, delivery_delay_s,
          retention_s, paused, purged_ms, content_dedup, dedup_scope
"""

UPDATE_QUEUE = """
UPDATE ocd_queues
SET name = $1, modified_ms = $2, delivery_delay_s = $3, retention_s = $4, paused = $5,
    content_dedup = $6, dedup_scope = $7
WHERE key = $8
RETURNING key, account, name, queue_id, created_ms, modified_ms, delivery_delay_s,
          retention_s, paused, purged_ms, content_dedup, dedup_scope
"""

# The rows of standard queue $1 (both bands), by primary key: ocd_messages has no index that
# starts with queue for every row (a FIFO queue's rows: by its late or group index).
_OF_QUEUE = "seq >= $1::bigint << 40 AND seq < ($1::bigint + 1) << 40 AND queue + 0 = $1"

# A queue's deletion: its cursor and tail rows locked (``queues.delete_queue`` says why),
# then its row (the rows with a foreign key go with it), which waits for every transaction
# adding messages to it (they hold its tail row or its row); then, in a statement of its own
# that sees what those committed, the rows without one (a check a message or a batch):
# messages (and with them FIFO order rows), held rows, leases and deduplication ids
# (``migrations/0014_messages_queue_check.sql``).
LOCK_CURSOR = "SELECT 1 FROM ocd_cursors WHERE queue = $1 FOR UPDATE"
LOCK_TAIL = "SELECT 1 FROM ocd_tails WHERE queue = $1 FOR UPDATE"
DELETE_QUEUE = "DELETE FROM ocd_queues WHERE key = $1"
DELETE_QUEUE_ROWS = f"""
WITH l AS (DELETE FROM ocd_leases WHERE queue = $1), h AS (DELETE FROM ocd_held WHERE queue = $1),
d AS (DELETE FROM ocd_dedup WHERE queue = $1)
DELETE FROM ocd_messages WHERE {_OF_QUEUE}
"""
DELETE_FIFO_QUEUE_ROWS = DELETE_QUEUE_ROWS.replace(_OF_QUEUE, "queue = $1 AND late")
MARK_PURGED = "UPDATE ocd_queues SET purged_ms = $1 WHERE key = $2"

NOTIFY = "SELECT pg_notify($1, '')"

# ------------------------------------------------------------------ consumers and secrets

SELECT_CONSUMERS = """
SELECT key, queue, consumer_id, created_ms, dead_letter_queue, settings FROM ocd_consumers
"""
UPSERT_CONSUMER = """
INSERT INTO ocd_consumers (queue, consumer_id, created_ms, dead_letter_queue, settings)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (queue) DO UPDATE SET dead_letter_queue = excluded.dead_letter_queue,
                                  settings = excluded.settings
RETURNING key, consumer_id, created_ms
"""
DELETE_CONSUMER = "DELETE FROM ocd_consumers WHERE queue = $1"
PUT_META = "INSERT INTO ocd_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING"
GET_META = "SELECT value FROM ocd_meta WHERE key = $1"
# A meta value that only grows: 8-byte big-endian integers compare as bytea in the order of
# their numbers, so of concurrent saves from any nodes the highest stays.
RAISE_META = """
INSERT INTO ocd_meta (key, value) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE excluded.value > ocd_meta.value
"""


# ------------------------------------------------------------------ messages
def count_change(source: str, queue: str, shard: str, sign: str) -> str:
    """A CTE body that adds (``sign`` "") or takes away ("-") the rows of ``source`` (a CTE
    returning ``size``) to the counts of ``queue`` in ``shard``, in the statement that
    changed them."""
    return (
        "INSERT INTO ocd_counts AS c (queue, shard, count, bytes)\n"
        f"  SELECT {queue}, {shard}, {sign}count(*), {sign}coalesce(sum(size), 0) FROM {source}"
        " HAVING count(*) > 0\n"
        "  ON CONFLICT (queue, shard) DO UPDATE\n"
        "  SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes"
    )


SPAN = 1 << 40  # seqs a queue owns (standard queues: ``migrations/0010_log.sql``)
DELAYED = 1 << 39  # the delayed band's offset in them

# A group of sends to standard queues of any number of queues, in one statement: seqs at the
# tail of each queue's ready band (delayed ones: of its delayed band, with held rows), taken
# in key order and held to the commit; the rows; the counts (shard $9), each queue's after
# its tail (the order a queue's deletion takes them in: ``queues.delete_queue``). The serial
# (FIFO rows' seqs) moves on by one a message, so that the database's position (``mark.py``)
# counts every message sent, as it did when every row took its seq from it.
_ENQUEUE_WITH = f"""
WITH u AS (
  SELECT u.*, u.vis > u.sent AS delayed
  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::integer[], $6::bigint[],
              $7::bigint[], $8::bytea[]) WITH ORDINALITY
       AS u (queue, id, ct, body, size, sent, vis, attrs, o)),
m AS (
  SELECT u.*, row_number() OVER (PARTITION BY u.queue, u.delayed ORDER BY u.o) AS k,
         max(u.sent) OVER (PARTITION BY u.queue ORDER BY u.o
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
  FROM u),
n AS (
  SELECT queue, count(*) FILTER (WHERE NOT delayed) AS r, count(*) FILTER (WHERE delayed) AS d,
         sum(size) AS b, max(sent) AS top
  FROM m GROUP BY queue),
t AS (
  INSERT INTO ocd_tails AS t (queue, tail, dtail, floor_ms)
  SELECT queue, r, d, top FROM n ORDER BY queue
  ON CONFLICT (queue) DO UPDATE SET tail = t.tail + excluded.tail, dtail = t.dtail + excluded.dtail,
                                    was_ms = t.floor_ms,
                                    floor_ms = greatest(t.floor_ms, excluded.floor_ms)
  RETURNING queue, tail, dtail, was_ms),
ins AS (
  INSERT INTO ocd_messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms, attrs,
                            late)
  SELECT (m.queue << 40) + m.k - 1
         + CASE WHEN m.delayed THEN {DELAYED} + t.dtail - n.d ELSE t.tail - n.r END,
         m.queue, m.id, m.ct, m.body, m.size, m.sent, m.vis, m.attrs,
         m.delayed OR m.sent < greatest(t.was_ms, m.before)
  FROM m JOIN n USING (queue) JOIN t USING (queue)
  RETURNING seq, queue, sent_ms, visible_ms),
h AS (
  INSERT INTO ocd_held (seq, queue, until_ms, attempts)
  SELECT seq, queue, visible_ms, 0 FROM ins WHERE visible_ms > sent_ms),
c AS (
  INSERT INTO ocd_counts AS c (queue, shard, count, bytes)
  SELECT n.queue, $9, n.r + n.d, n.b FROM n JOIN t USING (queue)
  ON CONFLICT (queue, shard) DO UPDATE
  SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes)"""
_SERIAL = (
    "SELECT max(nextval('ocd_messages_seq_seq')) FROM generate_series(1, (SELECT count(*) FROM m))"
)

ENQUEUE = f"{_ENQUEUE_WITH}\n{_SERIAL}\n"


def _oldest(q: str) -> str:
    """The send time of queue ``q``'s oldest message: the first of its ready band (no message
    in order after it was sent before it), or the oldest late one
    (``migrations/0015_late.sql``).

    The band's first row is looked for from the lowest seq that can still be live, not from
    the band's start: a walk from there stepped over every entry acked since the last vacuum
    (2,311 heap fetches after 15,000 acks). Below the cursor a message lives only under a
    lease (``ocd_claim`` writes both in one transaction; a lease that ends re-appends what
    it held) or held apart (``ocd_held``, in place), so the lowest of the cursor, the
    queue's lease runs and its held rows in the band bounds every live row from below. A
    queue's runs never overlap (each is taken from the cursor on), so the lowest run is the
    one that ends first: one probe of ``ocd_leases_run``, as ``ocd_release`` finds a run,
    rather than a read of every lease the queue holds (a pull consumer may hold thousands)."""
    band = f"{q}::bigint << 40"
    floor = (
        f"least(coalesce((SELECT c.next_seq FROM ocd_cursors c WHERE c.queue = {q}), {band}), "
        f"(SELECT l.lo FROM ocd_leases l WHERE l.queue = {q} ORDER BY l.hi LIMIT 1), "
        f"(SELECT min(h.seq) FROM ocd_held h WHERE h.seq >= {band} "
        f"AND h.seq < ({band}) + {DELAYED}))"
    )
    first = (  # min(): a walk of the primary key, whatever the statistics say
        f"SELECT min(f.seq) FROM ocd_messages f WHERE f.seq >= {floor} "
        f"AND f.seq < ({band}) + {DELAYED}"
    )
    return (
        f"least((SELECT m.sent_ms FROM ocd_messages m WHERE m.seq = ({first})), "
        f"(SELECT min(m.sent_ms) FROM ocd_messages m WHERE m.queue = {q} AND m.late))"
    )


def _counted(column: str, q: str) -> str:
    """Queue ``q``'s message count or bytes (``column``), the sum of its count shards."""
    return f"(SELECT coalesce(sum({column}), 0)::bigint FROM ocd_counts WHERE queue = {q})"


BACKLOGS_AND_NOTIFY = f"""
SELECT q,
       {_counted("count", "q")},
       {_counted("bytes", "q")},
       {_oldest("q")},
       pg_notify('ocd_q_' || q, '')
FROM unnest($1::bigint[]) AS q
"""

BACKLOG = f"""
SELECT {_counted("count", "$1")},
       {_counted("bytes", "$1")},
       {_oldest("$1")}
"""

# ``ENQUEUE`` as a transaction of its own, answering ``BACKLOGS_AND_NOTIFY``'s rows for its
# queues in the same round trip: a group of standard sends is then one statement, not four
# (BEGIN, the rows, the backlogs, COMMIT). The statement's snapshot does not see its own
# rows, so they are added to what it reads: their count and bytes, their first send time.
ENQUEUE_ALONE = f"""{_ENQUEUE_WITH},
s AS ({_SERIAL}),
f AS (SELECT queue, min(sent) AS first FROM u GROUP BY queue)
SELECT n.queue,
       {_counted("count", "n.queue")} + n.r + n.d,
       {_counted("bytes", "n.queue")} + n.b,
       least({_oldest("n.queue")}, f.first),
       pg_notify('ocd_q_' || n.queue, '')
FROM n JOIN f USING (queue) CROSS JOIN s
"""

ALL_COUNTS = "SELECT queue, sum(count)::bigint FROM ocd_counts GROUP BY queue"

_BAND_END = f"($1::bigint << 40) + {DELAYED}"
_CURSOR = "coalesce((SELECT next_seq FROM ocd_cursors WHERE queue = $1), $1::bigint << 40)"

# Ready now, for a standard queue: the ready band from the cursor, held messages that are
# due, and the messages of lapsed leases; when the one at the cursor was appended, the
# first due held and lapsed times, and the next time one becomes ready.
READY = f"""
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM ocd_messages WHERE seq >= {_CURSOR}
                         AND seq < {_BAND_END} AND queue + 0 = $1 LIMIT $3) AS r)
  + (SELECT count(*) FROM (SELECT 1 FROM ocd_held WHERE queue = $1 AND until_ms <= $2
                           LIMIT $3) AS h)
  + (SELECT count(*) FROM (SELECT 1 FROM ocd_leases l CROSS JOIN LATERAL (
                             SELECT 1 FROM ocd_messages m
                             WHERE m.seq BETWEEN l.lo AND l.hi AND m.queue + 0 = $1
                             LIMIT $3) AS m
                           WHERE l.queue = $1 AND l.deadline_ms <= $2 LIMIT $3) AS x),
  (SELECT visible_ms FROM ocd_messages WHERE seq >= {_CURSOR} AND seq < {_BAND_END}
   AND queue + 0 = $1 ORDER BY seq LIMIT 1),
  (SELECT min(until_ms) FROM ocd_held WHERE queue = $1 AND until_ms <= $2),
  (SELECT min(deadline_ms) FROM ocd_leases WHERE queue = $1 AND deadline_ms <= $2),
  (SELECT min(until_ms) FROM ocd_held WHERE queue = $1 AND until_ms > $2),
  (SELECT min(deadline_ms) FROM ocd_leases WHERE queue = $1 AND deadline_ms > $2)
"""

# A standard queue's claim, in one round trip (``ocd_claim``: cursor row lock, what is due
# appended, the run from the cursor under one lease row). Attempts counted with this claim.
CLAIM = """
SELECT seq, id, content_type, body, sent_ms, attempts, attrs, first_received_ms
FROM ocd_claim($1, $2, $3, $4, $5, $6::smallint, $7)
"""

# A transaction-scoped advisory lock of (class, key): CLAIM_LOCK or FIFO_LOCK, a queue key.
XACT_LOCK = "SELECT pg_advisory_xact_lock($1, $2::integer)"

# PUSH batches of a queue in flight now (a consumer's max_concurrency); lapsed leases
# (visible again) do not count.
PUSH_LEASES_HELD = """
SELECT count(*) FROM ocd_leases WHERE queue = $1 AND deadline_ms > $2 AND kind = 1
"""
# A FIFO queue's: a leased group is not ready, and its head is under the lease.
FIFO_PUSH_LEASES_HELD = """
SELECT count(DISTINCT h.lease) FROM ocd_groups g
CROSS JOIN LATERAL (SELECT x.lease, x.lease_kind, x.visible_ms FROM ocd_fifo_order x
                    WHERE x.queue = g.queue AND x.grp = g.grp ORDER BY x.fseq LIMIT 1) AS h
WHERE g.queue = $1 AND g.ready_ms > $2 AND h.visible_ms > $2 AND h.lease_kind = 1
"""

# Deletes by seq, keeping the counts: returns how many and their bytes.
DELETE_SEQS = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE seq = ANY($2::bigint[]) AND queue + 0 = $1 RETURNING size),
c AS (
  {count_change("d", "$1", "$3", "-")})
SELECT count(*) FROM d
"""

# Leases of a standard queue $1 left with no message by a change to the seqs between $2 and
# $3, dropped. SKIP LOCKED: a lease being ended or dropped by another transaction is that
# one's (waiting for it could close a cycle with a lapse, which locks the lease, then the
# messages); one missed lapses at its deadline and finds nothing to append. The messages of
# a lease are read by a scalar subquery (or a LATERAL one with a LIMIT or OFFSET below):
# never turned into a join, which before statistics could read the whole table.
_DROP_EMPTY = """
DELETE FROM ocd_leases WHERE lease IN (
  SELECT l.lease FROM ocd_leases l
  WHERE l.queue = $1 AND l.hi >= {lo} AND l.lo <= {hi}
    AND (SELECT m.seq FROM ocd_messages m
         WHERE m.seq BETWEEN l.lo AND l.hi AND m.queue + 0 = $1
           AND NOT EXISTS (SELECT 1 FROM ocd_held x WHERE x.seq = m.seq) LIMIT 1) IS NULL
  FOR UPDATE SKIP LOCKED)"""
_LO = "(SELECT min(s) FROM unnest($2::bigint[]) AS s)"
_HI = "(SELECT max(s) FROM unnest($2::bigint[]) AS s)"

# An ack-only settle of a standard queue in one round trip (``ocd_ack``,
# ``migrations/0013_ack.sql``, now ``0016_ack_lean.sql``): deletes, counts, held rows, the
# leases the acks emptied, and a notification of the queue; its plan made once a session.
ACK = "SELECT ocd_ack($1, $2::bigint[], $3::smallint)"

# After messages of a standard queue were deleted or moved away (an earlier statement of the
# transaction): their held rows and the leases they emptied go.
REMOVED = f"""
WITH h AS (DELETE FROM ocd_held WHERE seq = ANY($2::bigint[]) AND queue = $1)
{_DROP_EMPTY.format(lo=_LO, hi=_HI)}
"""

# After messages were held apart (retried): the leases left with none, dropped.
DROP_EMPTY_LEASES = _DROP_EMPTY.format(lo="$2", hi="$3")

# Claimed messages of a standard queue held apart until their time (a retry, a longer
# visibility): each keeps its seq, so the lease id that named it still does; its attempt
# stays counted. Only messages the cursor has passed (claimed ones) are held this way.
HOLD = """
INSERT INTO ocd_held (seq, queue, until_ms, attempts, first_received_ms)
SELECT m.seq, $1, r.until_ms, m.attempts + 1,
       coalesce(m.first_received_ms,
                (SELECT l.claimed_ms FROM ocd_leases l WHERE l.queue = $1 AND l.hi >= m.seq
                 ORDER BY l.hi LIMIT 1), $3)
FROM (SELECT u.seq, max(u.until_ms) AS until_ms FROM unnest($2::bigint[], $4::bigint[])
      AS u (seq, until_ms) GROUP BY u.seq) AS r
JOIN ocd_messages m ON m.seq = r.seq AND m.queue + 0 = $1
WHERE m.seq < (SELECT next_seq FROM ocd_cursors WHERE queue = $1)
ON CONFLICT (seq) DO UPDATE SET until_ms = excluded.until_ms
"""

# Messages of $1 appended anew into $6 (``ocd_reappend``): a dead-letter or a move into a
# standard queue, attempts and first receive starting again.
REAPPEND = "SELECT ocd_reappend($1, $2::bigint[], $3, $4, $5, $6, $7::smallint)"

# Handed back: re-appended with the attempt given back (``ocd_release``).
RELEASE_LOG = "SELECT ocd_release($1, $2::bigint[], $3, $4::smallint)"

# Leases of one queue ended now (a node's own at shutdown, a silent node's, doubtful
# claims'): their messages appended anew, $3 attempts counted.
END_LEASES = """
SELECT coalesce(sum(ocd_end_lease($1, l, $2, $3, false)), 0)::bigint FROM unnest($4::bigint[]) AS l
"""
# Log leases by queue: of owners no longer registered, of this node, of some claims of it.
ORPHAN_LEASES = """
SELECT queue, array_agg(lease) FROM ocd_leases
WHERE owner IS NOT NULL AND owner NOT IN (SELECT node_id FROM ocd_nodes)
GROUP BY queue ORDER BY queue
"""
OWN_LEASES = """
SELECT queue, array_agg(lease) FROM ocd_leases WHERE owner = $1 GROUP BY queue ORDER BY queue
"""
DOUBTFUL_LEASES = """
SELECT queue, array_agg(lease) FROM ocd_leases WHERE owner = $1 AND lease = ANY($2::bigint[])
GROUP BY queue ORDER BY queue
"""

# FIFO queues' retries (standard queues hold: ``HOLD``).
# (A FIFO message's changing state is its ocd_fifo_order row's, found from its row.)
RETRY = """
UPDATE ocd_fifo_order AS o
SET visible_ms = r.visible_ms, lease = NULL, lease_kind = NULL, owner = NULL
FROM unnest($2::bigint[], $3::bigint[]) AS r (seq, visible_ms)
JOIN ocd_messages m ON m.seq = r.seq AND m.queue + 0 = $1
WHERE o.queue = m.queue AND o.grp = m.grp AND o.fseq = m.fseq
"""

# FIFO queues: handing back unfinished work does not spend an attempt.
RELEASE_SEQS = """
UPDATE ocd_fifo_order o
SET attempts = greatest(o.attempts - 1, 0), visible_ms = $2, lease = NULL, lease_kind = NULL,
    owner = NULL
FROM ocd_messages m
WHERE m.seq = ANY($4::bigint[]) AND m.queue + 0 = $1
  AND o.queue = m.queue AND o.grp = m.grp AND o.fseq = m.fseq AND o.lease_kind = $3
RETURNING o.grp
"""

# The queues with a message past its retention period ($1: now), from each one's oldest (two
# probes, ``_oldest``): a sweep writes nothing to a queue with nothing to expire.
EXPIRABLE = f"""
SELECT q.key FROM ocd_queues q WHERE {_oldest("q.key")} < $1 - q.retention_s::bigint * 1000
"""

# Retention and purge delete in bounded chunks, so no statement holds a queue for long.
# Retention of a standard queue: held rows go with their messages; the seqs deleted, for the
# leases.
# Past their time: the late ones (their index) and the ready band's first ones, up to the
# first that is not: no message in order after that one was sent before it
# (``migrations/0015_late.sql``).
EXPIRE_LOG = f"""
WITH e AS (
  SELECT seq FROM ocd_messages WHERE queue = $1 AND late AND sent_ms < $2 LIMIT $3
  FOR UPDATE SKIP LOCKED),
f AS (
  SELECT seq FROM ocd_messages
  WHERE seq >= $1::bigint << 40 AND queue + 0 = $1
    AND seq < coalesce((SELECT min(x.seq) FROM ocd_messages x
                        WHERE x.seq >= $1::bigint << 40 AND x.seq < {_BAND_END}
                          AND x.sent_ms >= $2), {_BAND_END})
  ORDER BY seq LIMIT $3
  FOR UPDATE SKIP LOCKED),
d AS (
  DELETE FROM ocd_messages
  WHERE seq = ANY(ARRAY(SELECT seq FROM e UNION ALL SELECT seq FROM f)) AND queue + 0 = $1
  RETURNING seq, size),
c AS (
  {count_change("d", "$1", "$4", "-")}),
h AS (
  DELETE FROM ocd_held WHERE seq IN (SELECT seq FROM d))
SELECT count(*), min(seq), max(seq) FROM d
"""

# (FIFO queues: their rows are all late, ``migrations/0015_late.sql``)
LAST_SEQ = "SELECT coalesce(max(seq), 0) FROM ocd_messages WHERE queue = $1 AND late"

# A standard queue's purge: every message of the queue but those its two bands gave since
# the purge began ($2 and $3: the first seq each band would give then).
PURGE_BOUNDS = "SELECT tail, dtail FROM ocd_tails WHERE queue = $1"
PURGE_LOG_CHUNK = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE queue + 0 = $1 AND seq = ANY(ARRAY(
    SELECT seq FROM ocd_messages
    WHERE {_OF_QUEUE} AND NOT (seq >= $2 AND seq < ($1::bigint << 40) + {DELAYED})
      AND NOT (seq >= $3 AND seq < ($1::bigint + 1) << 40)
    ORDER BY seq LIMIT $4))
  RETURNING seq, size),
c AS (
  {count_change("d", "$1", "$5", "-")}),
h AS (
  DELETE FROM ocd_held WHERE seq IN (SELECT seq FROM d))
SELECT count(*) FROM d
"""
# then the leases wholly below the bound, and held rows whose message went
PURGE_LEASES = """
WITH h AS (DELETE FROM ocd_held h WHERE h.queue = $1
           AND NOT EXISTS (SELECT 1 FROM ocd_messages m WHERE m.seq = h.seq))
DELETE FROM ocd_leases WHERE queue = $1 AND hi < $2
"""

PURGE_CHUNK = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE seq IN (
    SELECT seq FROM ocd_messages WHERE queue = $1 AND late AND seq <= $2 LIMIT $3)
  RETURNING size),
c AS (
  {count_change("d", "$1", "$4", "-")})
SELECT count(*) FROM d
"""

# Ready FIFO messages in delivery order: the ready groups' runs, longest-waiting first.
PEEK = """
SELECT m.seq, m.id, m.content_type, m.body, m.sent_ms, o.attempts, m.grp, m.fseq, m.dedup,
       m.attrs
FROM (SELECT grp, ready_ms FROM ocd_groups WHERE queue = $1 AND ready_ms <= $2
      ORDER BY ready_ms LIMIT $3) AS g
CROSS JOIN LATERAL (SELECT x.seq, x.attempts, x.fseq FROM ocd_fifo_order x
                    WHERE x.queue = $1 AND x.grp = g.grp AND x.visible_ms <= $2
                    ORDER BY x.fseq LIMIT $3) AS o
JOIN ocd_messages m ON m.seq = o.seq
ORDER BY g.ready_ms, o.fseq LIMIT $3
"""

# Ready now without leasing, of a standard queue: the ready band from the cursor, the
# messages of lapsed leases and the held ones that are due, as readers see them.
_PEEKED = (
    "s.seq, s.id, s.content_type, s.body, s.sent_ms, s.attempts, s.grp, s.fseq, s.dedup, s.attrs"
)
PEEK_LOG = f"""
SELECT seq, id, content_type, body, sent_ms, attempts, grp, fseq, dedup, attrs FROM (
  (SELECT {_PEEKED}, s.visible_ms FROM ocd_message_states s
   WHERE s.seq >= {_CURSOR} AND s.seq < {_BAND_END} AND s.queue + 0 = $1
   ORDER BY s.seq LIMIT $3)
  UNION ALL
  (SELECT {_PEEKED}, s.visible_ms FROM ocd_leases l CROSS JOIN LATERAL (
     SELECT * FROM ocd_message_states s
     WHERE s.seq BETWEEN l.lo AND l.hi AND s.queue + 0 = $1 AND s.visible_ms <= $2 LIMIT $3) AS s
   WHERE l.queue = $1 AND l.deadline_ms <= $2 LIMIT $3)
  UNION ALL
  (SELECT {_PEEKED}, s.visible_ms FROM ocd_held h JOIN ocd_message_states s ON s.seq = h.seq
   WHERE h.queue = $1 AND h.until_ms <= $2 LIMIT $3)
) AS p ORDER BY visible_ms, seq LIMIT $3
"""

# Per queue: messages not ready now (delayed, retrying later, or leased), and of those the
# leased ones. Walks only the not-ready part of the index.
# A FIFO queue's: those among the first 1,000 of each group that is not ready (a group's
# leased or retrying messages are at its head); with a delivery delay, delayed messages lie
# at the groups' tails too, and the queue is counted in full (NOT_READY_ALL).
NOT_READY = """
SELECT coalesce(sum(n.c), 0)::bigint, coalesce(sum(n.l), 0)::bigint FROM ocd_groups g
CROSS JOIN LATERAL (
  SELECT count(*) AS c, count(y.lease_kind) AS l FROM (
    SELECT x.visible_ms, x.lease_kind FROM ocd_fifo_order x
    WHERE x.queue = g.queue AND x.grp = g.grp ORDER BY x.fseq LIMIT 1000) AS y
  WHERE y.visible_ms > $2) AS n
WHERE g.queue = $1 AND g.ready_ms > $2
"""
NOT_READY_ALL = """
SELECT count(*), count(lease_kind) FROM ocd_fifo_order WHERE queue = $1 AND visible_ms > $2
"""

# A standard queue's: held until later, and under a live lease.
NOT_READY_LOG = """
SELECT (SELECT count(*) FROM ocd_held WHERE queue = $1 AND until_ms > $2),
       (SELECT count(*) FROM ocd_leases l CROSS JOIN LATERAL (
          SELECT 1 FROM ocd_messages m WHERE m.seq BETWEEN l.lo AND l.hi AND m.queue + 0 = $1
            AND NOT EXISTS (SELECT 1 FROM ocd_held h WHERE h.seq = m.seq) OFFSET 0) AS m
        WHERE l.queue = $1 AND l.deadline_ms > $2)
"""


# ------------------------------------------------------------------ migrate-store (load.py)

HOLDS_DATA = "SELECT (SELECT count(*) FROM ocd_queues) + (SELECT count(*) FROM ocd_messages)"
WIPE = """
TRUNCATE ocd_messages, ocd_fifo_order, ocd_counts, ocd_consumers, ocd_groups, ocd_dedup,
         ocd_cron_ticks,
         ocd_move_tasks, ocd_queues, ocd_meta, ocd_tails, ocd_cursors, ocd_leases, ocd_held
RESTART IDENTITY
"""
COPY_QUEUE = """
INSERT INTO ocd_queues (account, name, queue_id, created_ms, modified_ms,
                        delivery_delay_s, retention_s, paused, purged_ms, content_dedup,
                        dedup_scope, fifo_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING key
"""
QUEUE_EXTRAS = "SELECT sqs_attrs, tags FROM ocd_queues WHERE key = $1"
SET_QUEUE_EXTRAS = "UPDATE ocd_queues SET sqs_attrs = $2, tags = $3 WHERE key = $1"
COPY_META = """
INSERT INTO ocd_meta (key, value) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""
COPY_COLUMNS = (
    "seq",
    "queue",
    "id",
    "content_type",
    "body",
    "size",
    "sent_ms",
    "visible_ms",
    "attempts",
    "grp",
    "dedup",
    "fseq",
    "attrs",
    "first_received_ms",
)
DEDUP_COLUMNS = ("queue", "scope", "dedup", "expires_ms", "message_id", "fseq")
# A copy keeps the seqs of the messages that wait (a pull lease id names its message's seq)
# and of FIFO ones; the standard ones ready now come in negated, and go into their queues'
# bands after what the kept ones take of them (``ocd_relog(0)``): no seq is given twice.
SERIAL_AFTER_COPY = """
SELECT setval('ocd_messages_seq_seq',
              greatest((SELECT max(seq) FROM ocd_messages
                        WHERE seq > 0 AND seq < 1::bigint << 40), 1))
"""
QUEUE_KEYS_AFTER_COPY = """
SELECT setval(pg_get_serial_sequence('ocd_queues', 'key'),
              greatest((SELECT max(key) FROM ocd_queues),
                       (SELECT max(seq >> 40) FROM ocd_messages WHERE seq > 0), 1))
"""
# the bands the kept seqs lie in give no seq at or below them
TAILS_AFTER_COPY = f"""
INSERT INTO ocd_tails AS t (queue, tail, dtail, floor_ms)
SELECT seq >> 40,
       coalesce(max((seq & {SPAN - 1}) + 1) FILTER (WHERE seq & {DELAYED} = 0), 0),
       coalesce(max((seq & {DELAYED - 1}) + 1) FILTER (WHERE seq & {DELAYED} <> 0), 0),
       max(sent_ms)
FROM ocd_messages WHERE seq >= 1::bigint << 40 AND (seq >> 40) IN (SELECT key FROM ocd_queues)
GROUP BY seq >> 40
ON CONFLICT (queue) DO UPDATE
SET tail = greatest(t.tail, excluded.tail), dtail = greatest(t.dtail, excluded.dtail),
    floor_ms = greatest(t.floor_ms, excluded.floor_ms)
"""
HOLD_COPIED = """
INSERT INTO ocd_held (seq, queue, until_ms, attempts, first_received_ms)
SELECT seq, queue, visible_ms, attempts, first_received_ms FROM ocd_messages
WHERE grp IS NULL AND seq > 0
"""
RELOG = "SELECT ocd_relog(0)"
RELABEL = "SELECT ocd_relabel()"  # then which of them are in order (0015_late.sql)
# The copied FIFO messages' order rows, their state as the dump gave it.
ORDER_COPIED = """
INSERT INTO ocd_fifo_order
SELECT queue, grp, fseq, seq, visible_ms, attempts, first_received_ms, NULL, NULL, NULL
FROM ocd_messages WHERE grp IS NOT NULL
"""
COPY_COUNTS = "INSERT INTO ocd_counts (queue, shard, count, bytes) VALUES ($1, 0, $2, $3)"


# ------------------------------------------------------------------ cron triggers

# The row lock of the conflicting row serialises concurrent claims of one schedule: the
# loser re-checks the WHERE against the winner's tick and updates nothing.
CLAIM_CRON_TICK = """
INSERT INTO ocd_cron_ticks (schedule, due_ms, node) VALUES ($1, $2, $3)
ON CONFLICT (schedule) DO UPDATE SET due_ms = excluded.due_ms, node = excluded.node
WHERE ocd_cron_ticks.due_ms < excluded.due_ms
RETURNING schedule
"""

CRON_LAST_TICKS = "SELECT schedule, due_ms FROM ocd_cron_ticks"
# ---------------------------------------------------------------- browsing (the dashboard)

_BROWSED = (
    "seq, id, content_type, substring(body from 1 for $3), size, sent_ms, visible_ms, "
    "attempts, lease IS NOT NULL AND visible_ms > $2, grp, fseq"
)
_STATES = {
    "any": "",
    "ready": " AND visible_ms <= $2",
    "delayed": " AND visible_ms > $2 AND lease IS NULL",
    "inflight": " AND visible_ms > $2 AND lease IS NOT NULL",
}


@functools.cache
def browse(newest_first: bool, state: str) -> str:
    """A keyset page of a queue's late messages (``migrations/0015_late.sql``: a FIFO queue's
    are all late) over their (queue, sent_ms, seq) index from the cursor (sent_ms, seq), no
    offset. Parameters $1 queue, $2 now, $3 body bytes, $4 $5 cursor, $6 $7 send-time range,
    $8 least attempts, $9 limit."""
    op, order = ("<", "DESC") if newest_first else (">", "ASC")
    return (
        f"SELECT {_BROWSED} FROM ocd_message_states "
        f"WHERE queue = $1 AND late AND (sent_ms, seq) {op} ($4::bigint, $5::bigint) "
        f"AND sent_ms BETWEEN $6 AND $7 AND attempts >= $8{_STATES[state]} "
        f"ORDER BY sent_ms {order}, seq {order} LIMIT $9"
    )


@functools.cache
def browse_in_order(newest_first: bool, state: str) -> str:
    """The same page of a standard queue's messages in order (not late): its ready band in seq
    order, which is their send time order, between the seqs ``ocd_seek`` finds for the cursor
    and the range. The caller merges the two pages."""
    band = f"$1::bigint << 40, ($1::bigint << 40) + {DELAYED}"
    since = f"ocd_seek($1, {band}, $6::bigint, -1)"
    until = f"ocd_seek($1, {band}, $7::bigint + 1, -1)"
    if newest_first:  # before the cursor
        at = f"ocd_seek($1, {band}, $4::bigint, $5::bigint)"
        lo, hi, order = since, f"least({at}, {until})", "DESC"
    else:  # after it
        at = f"ocd_seek($1, {band}, $4::bigint, $5::bigint + 1)"
        lo, hi, order = f"greatest({at}, {since})", until, "ASC"
    return (
        f"SELECT {_BROWSED} FROM ocd_message_states "
        f"WHERE seq >= {lo} AND seq < {hi} AND queue + 0 = $1 AND NOT late "
        f"AND attempts >= $8{_STATES[state]} ORDER BY seq {order} LIMIT $9"
    )


MESSAGE_BY_SEQ = f"SELECT {_BROWSED} FROM ocd_message_states WHERE seq = $4 AND queue + 0 = $1"

# Which of the seqs $2 the queue $1 holds.
PRESENT_SEQS = "SELECT seq FROM ocd_messages WHERE seq = ANY($2::bigint[]) AND queue + 0 = $1"

# The newest $4 messages of a queue (of those in order and the late ones), then the matches
# among them, as readers see them.
SEARCH = f"""
SELECT {_BROWSED} FROM ocd_message_states WHERE queue + 0 = $1 AND seq = ANY(ARRAY(
  SELECT seq FROM (
    SELECT * FROM (
      (SELECT seq, sent_ms, body, id FROM ocd_messages
       WHERE seq >= $1::bigint << 40 AND seq < {_BAND_END} AND queue + 0 = $1 AND NOT late
       ORDER BY seq DESC LIMIT $4)
      UNION ALL
      (SELECT seq, sent_ms, body, id FROM ocd_messages WHERE queue = $1 AND late
       ORDER BY sent_ms DESC, seq DESC LIMIT $4)) u
    ORDER BY sent_ms DESC, seq DESC LIMIT $4) w
  WHERE ($5::bytea IS NULL OR position($5::bytea in body) > 0) AND ($6::text IS NULL OR id = $6)
  ORDER BY sent_ms DESC, seq DESC LIMIT $7))
ORDER BY sent_ms DESC, seq DESC
"""

SEARCH_WINDOW = f"""
SELECT count(*) FROM (SELECT 1 FROM ocd_messages WHERE {_OF_QUEUE} ORDER BY seq LIMIT $2) w
"""
FIFO_SEARCH_WINDOW = """
SELECT count(*) FROM (SELECT 1 FROM ocd_messages WHERE queue = $1 AND late
                      ORDER BY sent_ms LIMIT $2) w
"""

# ------------------------------------------------------------------ bulk move tasks

MOVE_TASK_COLUMNS = """
task_id, account, source_id, source, destination_id, destination, total, started_ms, done,
state, error, finished_ms, rate, bound_sent, bound_seq, cursor_sent, cursor_seq, spec, node
"""

# ON CONFLICT DO NOTHING: a second active redrive of one source inserts nothing.
INSERT_MOVE_TASK = f"""
INSERT INTO ocd_move_tasks ({MOVE_TASK_COLUMNS})
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
ON CONFLICT DO NOTHING
RETURNING task_id
"""

FORGET_MOVE_TASKS = "DELETE FROM ocd_move_tasks WHERE finished_ms IS NOT NULL AND finished_ms < $1"

SELECT_MOVE_TASKS = f"""
SELECT {MOVE_TASK_COLUMNS} FROM ocd_move_tasks ORDER BY started_ms DESC, task_id
"""

MOVE_TASK_PROGRESS = f"""
UPDATE ocd_move_tasks SET done = done + $1, cursor_sent = coalesce($2, cursor_sent),
                          cursor_seq = coalesce($3, cursor_seq)
WHERE task_id = $4
RETURNING {MOVE_TASK_COLUMNS}
"""

SET_MOVE_TASK_STATE = f"""
UPDATE ocd_move_tasks SET state = $1, error = coalesce($2, error), finished_ms = $3
WHERE task_id = $4 AND state = ANY($5::text[])
RETURNING {MOVE_TASK_COLUMNS}
"""

# Active tasks of nodes no longer registered (a node's row goes at its clean stop, or when
# another reaps it for a lapsed heartbeat): this node's now.
COUNT_ORPHAN_MOVE_TASKS = """
SELECT count(*) FROM ocd_move_tasks
WHERE state IN ('running', 'cancelling') AND node <> $1
  AND node NOT IN (SELECT node_id FROM ocd_nodes)
"""

ADOPT_MOVE_TASKS = f"""
UPDATE ocd_move_tasks SET node = $1
WHERE state IN ('running', 'cancelling') AND node <> $1
  AND node NOT IN (SELECT node_id FROM ocd_nodes)
RETURNING {MOVE_TASK_COLUMNS}
"""

# ---------------------------------------------------------------- KV namespaces

KV_GET = """
SELECT value, expires_ms, metadata FROM ocd_kv
WHERE account = $1 AND namespace = $2 AND key = $3 AND (expires_ms IS NULL OR expires_ms > $4)
"""
KV_PUT = """
INSERT INTO ocd_kv (account, namespace, key, value, expires_ms, metadata)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (account, namespace, key) DO UPDATE SET
  value = excluded.value, expires_ms = excluded.expires_ms, metadata = excluded.metadata
"""
KV_DELETE = "DELETE FROM ocd_kv WHERE account = $1 AND namespace = $2 AND key = $3"
# $3 lower bound (inclusive), $4 after (exclusive), $5 upper bound (NULL: none), $6 now
KV_LIST = """
SELECT key, expires_ms, metadata FROM ocd_kv
WHERE account = $1 AND namespace = $2 AND key >= $3 AND key > $4
  AND ($5::text IS NULL OR key < $5) AND (expires_ms IS NULL OR expires_ms > $6)
ORDER BY key LIMIT $7
"""
KV_EXPIRE = """
DELETE FROM ocd_kv WHERE ctid IN (
  SELECT ctid FROM ocd_kv WHERE expires_ms IS NOT NULL AND expires_ms <= $1 LIMIT $2
  FOR UPDATE SKIP LOCKED
)
"""
