"""Every SQL statement of the PostgreSQL backend, by name, but for the FIFO queues' ones
(``fifo_sql.py``) and the schema's migrations (``migrations/``). Nothing else in ocd writes
SQL.

Tables carry an ``ocd_`` prefix so that ocd can share a database (or schema) with others.
Message statements name their queue and look messages up by primary key or by a bounded
range of ``(queue, visible_ms)`` / ``(queue, sent_ms)``; ``tests/store/test_postgres.py``
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
UPDATE ocd_messages SET visible_ms = $2, lease = NULL, lease_kind = NULL, owner = NULL
WHERE owner IN (SELECT node_id FROM dead)
RETURNING queue, grp
"""
# A node's own PUSH leases, returned at its clean shutdown (its dispatchers have released
# what they could; this is the rest) or when it finds it was taken for dead.
RETURN_OWN = """
UPDATE ocd_messages SET visible_ms = $2, lease = NULL, lease_kind = NULL, owner = NULL
WHERE owner = $1
RETURNING queue, grp
"""

# Claims whose reply was lost with the connection (it may have committed): their messages,
# if the claim did commit, go back at once and with their attempt given back.
RETURN_DOUBTFUL = """
UPDATE ocd_messages
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

DELETE_QUEUE = "DELETE FROM ocd_queues WHERE key = $1"
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


# A group of sends of any number of queues: one statement inserts the rows and adds them
# to the counts (shard $9), one more reads each queue's backlog and notifies its channel.
ENQUEUE = """
WITH ins AS (
  INSERT INTO ocd_messages (queue, id, content_type, body, size, sent_ms, visible_ms, attrs)
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::integer[],
                       $6::bigint[], $7::bigint[], $8::bytea[])
  RETURNING queue, size)
INSERT INTO ocd_counts AS c (queue, shard, count, bytes)
SELECT queue, $9, count(*), sum(size) FROM ins GROUP BY queue
ON CONFLICT (queue, shard) DO UPDATE
SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes
"""

BACKLOGS_AND_NOTIFY = """
SELECT q,
       (SELECT coalesce(sum(count), 0)::bigint FROM ocd_counts WHERE queue = q),
       (SELECT coalesce(sum(bytes), 0)::bigint FROM ocd_counts WHERE queue = q),
       (SELECT min(sent_ms) FROM ocd_messages WHERE queue = q),
       pg_notify('ocd_q_' || q, '')
FROM unnest($1::bigint[]) AS q
"""

BACKLOG = """
SELECT (SELECT coalesce(sum(count), 0)::bigint FROM ocd_counts WHERE queue = $1),
       (SELECT coalesce(sum(bytes), 0)::bigint FROM ocd_counts WHERE queue = $1),
       (SELECT min(sent_ms) FROM ocd_messages WHERE queue = $1)
"""

ALL_COUNTS = "SELECT queue, sum(count)::bigint FROM ocd_counts GROUP BY queue"

READY = """
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM ocd_messages
                         WHERE queue = $1 AND visible_ms <= $2
                         ORDER BY visible_ms LIMIT $3) AS r),
  (SELECT min(visible_ms) FROM ocd_messages WHERE queue = $1 AND visible_ms <= $2),
  (SELECT min(visible_ms) FROM ocd_messages WHERE queue = $1 AND visible_ms > $2)
"""

# The attempt is counted when the batch is claimed; the first claim's time stays. SKIP
# LOCKED: concurrent claimers, on any node, pass over each other's rows instead of waiting
# for them.
CLAIM = """
WITH picked AS (
  SELECT seq FROM ocd_messages
  WHERE queue = $1 AND visible_ms <= $2
  ORDER BY visible_ms LIMIT $3
  FOR UPDATE SKIP LOCKED)
UPDATE ocd_messages AS m
SET attempts = m.attempts + 1, visible_ms = $4, lease = $5, lease_kind = $6, owner = $7,
    first_received_ms = coalesce(m.first_received_ms, $2)
FROM picked WHERE m.seq = picked.seq
RETURNING m.seq, m.id, m.content_type, m.body, m.sent_ms, m.attempts, m.attrs,
          m.first_received_ms
"""

# A transaction-scoped advisory lock of (class, key): CLAIM_LOCK or FIFO_LOCK, a queue key.
XACT_LOCK = "SELECT pg_advisory_xact_lock($1, $2::integer)"

# PUSH batches of a queue in flight now (a consumer's max_concurrency); lapsed leases
# (visible again) do not count.
PUSH_LEASES_HELD = """
SELECT count(DISTINCT lease) FROM ocd_messages
WHERE queue = $1 AND visible_ms > $2 AND lease_kind = 1
"""

# Deletes by seq, keeping the counts: returns how many and their bytes.
DELETE_SEQS = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE seq = ANY($2::bigint[]) AND queue + 0 = $1 RETURNING size),
c AS (
  {count_change("d", "$1", "$3", "-")})
SELECT count(*) FROM d
"""

# An ack-only settle in one statement and one round trip: deletes, counts, and notifies the
# queue (a capped consumer on another node may now start a batch).
ACK_AND_NOTIFY = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE seq = ANY($2::bigint[]) AND queue + 0 = $1 RETURNING size),
c AS (
  {count_change("d", "$1", "$3", "-")})
SELECT (SELECT count(*) FROM d), pg_notify('ocd_q_' || $1, '')
"""

RETRY = """
UPDATE ocd_messages AS m
SET visible_ms = r.visible_ms, lease = NULL, lease_kind = NULL, owner = NULL
FROM unnest($2::bigint[], $3::bigint[]) AS r (seq, visible_ms)
WHERE m.seq = r.seq AND m.queue + 0 = $1
"""

# Same id and timestamp in the dead-letter queue ($2); attempts (and the first receive)
# start again.
MOVE_SEQS = f"""
WITH mv AS (
  UPDATE ocd_messages
  SET queue = $2, attempts = 0, visible_ms = $3, lease = NULL, lease_kind = NULL, owner = NULL,
      grp = NULL, fseq = NULL, first_received_ms = NULL
  WHERE seq = ANY($4::bigint[]) AND queue + 0 = $1
  RETURNING size),
a AS (
  {count_change("mv", "$1", "$5", "-")}),
b AS (
  {count_change("mv", "$2", "$5", "")})
SELECT count(*) FROM mv
"""

# Handing back unfinished work does not spend an attempt.
RELEASE_SEQS = """
UPDATE ocd_messages
SET attempts = greatest(attempts - 1, 0), visible_ms = $2, lease = NULL, lease_kind = NULL,
    owner = NULL
WHERE seq = ANY($4::bigint[]) AND queue + 0 = $1 AND lease_kind = $3
RETURNING grp
"""

# Retention and purge delete in bounded chunks, so no statement holds a queue for long.
EXPIRE = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE seq IN (
    SELECT seq FROM ocd_messages WHERE queue = $1 AND sent_ms < $2 LIMIT $3
    FOR UPDATE SKIP LOCKED)
  RETURNING size),
c AS (
  {count_change("d", "$1", "$4", "-")})
SELECT count(*) FROM d
"""

LAST_SEQ = "SELECT coalesce(max(seq), 0) FROM ocd_messages WHERE queue = $1"

PURGE_CHUNK = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE seq IN (
    SELECT seq FROM ocd_messages WHERE queue = $1 AND seq <= $2 LIMIT $3)
  RETURNING size),
c AS (
  {count_change("d", "$1", "$4", "-")})
SELECT count(*) FROM d
"""

PEEK = """
SELECT seq, id, content_type, body, sent_ms, attempts, grp, fseq, dedup, attrs FROM ocd_messages
WHERE queue = $1 AND visible_ms <= $2 ORDER BY visible_ms LIMIT $3
"""

# Per queue: messages not ready now (delayed, retrying later, or leased), and of those the
# leased ones. Walks only the not-ready part of the index.
NOT_READY = """
SELECT count(*), count(lease_kind) FROM ocd_messages WHERE queue = $1 AND visible_ms > $2
"""


# ------------------------------------------------------------------ migrate-store (load.py)

HOLDS_DATA = "SELECT (SELECT count(*) FROM ocd_queues) + (SELECT count(*) FROM ocd_messages)"
WIPE = """
TRUNCATE ocd_messages, ocd_counts, ocd_consumers, ocd_groups, ocd_dedup, ocd_cron_ticks,
         ocd_move_tasks, ocd_queues, ocd_meta
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
# new messages continue after the copied ones' seqs
SEQ_AFTER_COPY = """
SELECT setval(pg_get_serial_sequence('ocd_messages', 'seq'),
              greatest((SELECT max(seq) FROM ocd_messages), 1))
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
    """A keyset page over the (queue, sent_ms) index from the cursor (sent_ms, seq), no
    offset. Parameters $1 queue, $2 now, $3 body bytes, $4 $5 cursor, $6 $7 send-time
    range, $8 least attempts, $9 limit."""
    op, order = ("<", "DESC") if newest_first else (">", "ASC")
    return (
        f"SELECT {_BROWSED} FROM ocd_messages "
        f"WHERE queue = $1 AND (sent_ms, seq) {op} ($4::bigint, $5::bigint) "
        f"AND sent_ms BETWEEN $6 AND $7 AND attempts >= $8{_STATES[state]} "
        f"ORDER BY sent_ms {order}, seq {order} LIMIT $9"
    )


MESSAGE_BY_SEQ = f"SELECT {_BROWSED} FROM ocd_messages WHERE seq = $4 AND queue + 0 = $1"

# Which of the seqs $2 the queue $1 holds.
PRESENT_SEQS = "SELECT seq FROM ocd_messages WHERE seq = ANY($2::bigint[]) AND queue + 0 = $1"

# The newest $4 messages of a queue, then the matches among them.
SEARCH = f"""
SELECT {_BROWSED} FROM (
  SELECT * FROM ocd_messages WHERE queue = $1 ORDER BY sent_ms DESC, seq DESC LIMIT $4) w
WHERE ($5::bytea IS NULL OR position($5::bytea in body) > 0) AND ($6::text IS NULL OR id = $6)
ORDER BY sent_ms DESC, seq DESC LIMIT $7
"""

SEARCH_WINDOW = "SELECT count(*) FROM (SELECT 1 FROM ocd_messages WHERE queue = $1 LIMIT $2) w"

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
