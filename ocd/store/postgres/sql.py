"""Every SQL statement of the PostgreSQL backend, by name. Nothing else in ocd writes SQL.

Tables carry an ``ocd_`` prefix so that ocd can share a database (or schema) with others.
Message statements name their queue and look messages up by primary key or by a bounded
range of ``(queue, visible_ms)`` / ``(queue, sent_ms)``; ``tests/store/test_postgres.py``
pins those plans, on a table with statistics and on one never analysed (a new database, or
one that filled faster than autovacuum ran). Statements that name messages by seq test
their queue as ``queue + 0``, which no index serves, so that the planner looks the seqs up
by primary key instead of walking the queue's index (as SQLite's unary ``+`` does).
"""

import functools

SCHEMA_LOCK = 0x6F636421  # advisory lock held while migrating: nodes starting together
CLAIM_LOCK = 0x6F636422  # advisory lock class for capped (max_concurrency) claims

SCHEMA_TABLE = """
CREATE TABLE IF NOT EXISTS ocd_schema (version integer NOT NULL)
"""
SCHEMA_VERSION = "SELECT version FROM ocd_schema"
SCHEMA_INIT = "INSERT INTO ocd_schema (version) VALUES (0)"
SCHEMA_SET = "UPDATE ocd_schema SET version = $1"

# Each entry upgrades the schema by one version.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE ocd_nodes (
        node_id      text PRIMARY KEY,
        host         text NOT NULL,
        pid          integer NOT NULL,
        started_at   timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE ocd_queues (
        key              bigserial PRIMARY KEY,
        account          text    NOT NULL,
        name             text    NOT NULL,
        queue_id         text    NOT NULL UNIQUE,
        created_ms       bigint  NOT NULL,
        modified_ms      bigint  NOT NULL,
        delivery_delay_s integer NOT NULL,
        retention_s      integer NOT NULL,
        paused           boolean NOT NULL,
        purged_ms        bigint,
        UNIQUE (account, name)
    );
    CREATE TABLE ocd_messages (
        -- a sequence: a seq is never reused, so a stale lease can never name another message
        seq          bigserial PRIMARY KEY,
        queue        bigint  NOT NULL REFERENCES ocd_queues (key) ON DELETE CASCADE,
        id           text    NOT NULL,
        content_type text    NOT NULL,
        body         bytea   NOT NULL,
        size         integer NOT NULL,
        sent_ms      bigint  NOT NULL,
        visible_ms   bigint  NOT NULL,
        attempts     integer NOT NULL DEFAULT 0,
        lease        bigint,
        lease_kind   smallint,
        owner        text    -- the node holding a PUSH lease
    );
    CREATE INDEX ocd_messages_visible ON ocd_messages (queue, visible_ms);
    CREATE INDEX ocd_messages_sent ON ocd_messages (queue, sent_ms);
    CREATE INDEX ocd_messages_owner ON ocd_messages (owner) WHERE owner IS NOT NULL;
    -- Backlog counts, kept in the transactions that change them; several rows a queue
    -- (shards) so that concurrent transactions rarely wait on one row.
    CREATE TABLE ocd_counts (
        queue  bigint   NOT NULL REFERENCES ocd_queues (key) ON DELETE CASCADE,
        shard  smallint NOT NULL,
        count  bigint   NOT NULL,
        bytes  bigint   NOT NULL,
        PRIMARY KEY (queue, shard)
    );
    CREATE TABLE ocd_consumers (
        key               bigserial PRIMARY KEY,
        queue             bigint NOT NULL UNIQUE REFERENCES ocd_queues (key) ON DELETE CASCADE,
        consumer_id       text   NOT NULL UNIQUE,
        created_ms        bigint NOT NULL,
        dead_letter_queue text,
        settings          text   NOT NULL
    );
    CREATE TABLE ocd_meta (key text PRIMARY KEY, value bytea NOT NULL);
    """,
    """
    -- A queue table turns over fast: keep its statistics and its dead rows up with it.
    ALTER TABLE ocd_messages SET (autovacuum_vacuum_scale_factor = 0.02,
                                  autovacuum_analyze_scale_factor = 0.02);
    ALTER TABLE ocd_counts SET (autovacuum_vacuum_scale_factor = 0,
                                autovacuum_vacuum_threshold = 1000);
    """,
    """
    -- FIFO queues (names ending in .fifo): settings, the last sequence number given, and per
    -- message its group, deduplication id and sequence number.
    ALTER TABLE ocd_queues ADD COLUMN content_dedup boolean NOT NULL DEFAULT false,
                           ADD COLUMN dedup_scope text NOT NULL DEFAULT 'queue',
                           ADD COLUMN fifo_seq bigint NOT NULL DEFAULT 0;
    ALTER TABLE ocd_messages ADD COLUMN grp text, ADD COLUMN dedup text, ADD COLUMN fseq bigint;
    CREATE INDEX ocd_messages_group ON ocd_messages (queue, grp, fseq) WHERE grp IS NOT NULL;
    -- One row per FIFO group with messages: ready_ms is when its head (lowest fseq) is
    -- visible, so the ready groups are a range of one index however deep any group is.
    CREATE TABLE ocd_groups (
        queue    bigint NOT NULL REFERENCES ocd_queues (key) ON DELETE CASCADE,
        grp      text   NOT NULL,
        ready_ms bigint NOT NULL,
        PRIMARY KEY (queue, grp)
    );
    CREATE INDEX ocd_groups_ready ON ocd_groups (queue, ready_ms);
    -- Deduplication ids seen in the last five minutes (scope: '' or the group).
    CREATE TABLE ocd_dedup (
        queue      bigint NOT NULL REFERENCES ocd_queues (key) ON DELETE CASCADE,
        scope      text   NOT NULL,
        dedup      text   NOT NULL,
        expires_ms bigint NOT NULL,
        message_id text   NOT NULL,
        fseq       bigint NOT NULL,
        PRIMARY KEY (queue, scope, dedup)
    );
    -- Ids are written in send order, so their expiry follows the table's physical order:
    -- a BRIN index finds the lapsed ones for pruning at a fraction of a btree's cost per send.
    CREATE INDEX ocd_dedup_expires ON ocd_dedup USING brin (expires_ms)
      WITH (autosummarize = on);
    -- Claim the ready heads and the ready runs behind them, longest-waiting group first, in
    -- one round trip: a loop that stops as soon as the batch is full, as SQLite's does.
    CREATE FUNCTION ocd_fifo_claim(q bigint, now_ms bigint, n integer, until_ms bigint,
                                   lease_id bigint, kind smallint, node text)
    RETURNS TABLE (seq bigint, id text, content_type text, body bytea, sent_ms bigint,
                   attempts integer, grp text, fseq bigint, dedup text, ord bigint)
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      g record;
      m record;
      picked bigint[] := '{}';
      taken text[] := '{}';
      stale text[] := '{}';
      k integer := 0;
      took boolean;
    BEGIN
      PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK, for the transaction
      FOR g IN SELECT o.grp FROM ocd_groups o
               WHERE o.queue = q AND o.ready_ms <= now_ms ORDER BY o.ready_ms LIMIT n LOOP
        took := false;
        FOR m IN SELECT x.seq, x.visible_ms FROM ocd_messages x
                 WHERE x.queue = q AND x.grp = g.grp ORDER BY x.fseq LIMIT n - k LOOP
          EXIT WHEN m.visible_ms > now_ms;
          picked := picked || m.seq;
          k := k + 1;
          took := true;
        END LOOP;
        IF took THEN taken := taken || g.grp; ELSE stale := stale || g.grp; END IF;
        EXIT WHEN k >= n;
      END LOOP;
      IF cardinality(stale) > 0 THEN PERFORM ocd_fifo_refresh(q, stale); END IF;
      UPDATE ocd_groups o SET ready_ms = until_ms WHERE o.queue = q AND o.grp = ANY (taken);
      RETURN QUERY
        UPDATE ocd_messages x
        SET attempts = x.attempts + 1, visible_ms = until_ms, lease = lease_id,
            lease_kind = kind, owner = node
        FROM unnest(picked) WITH ORDINALITY AS p (s, o)
        WHERE x.seq = p.s AND x.queue + 0 = q
        RETURNING x.seq, x.id, x.content_type, x.body, x.sent_ms, x.attempts, x.grp, x.fseq,
                  x.dedup, p.o;
    END
    $fn$;
    -- Make the rows of some groups true again: the head's visibility, or gone if empty.
    CREATE FUNCTION ocd_fifo_refresh(q bigint, groups text[]) RETURNS void
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      g text;
      head bigint;
    BEGIN
      FOREACH g IN ARRAY groups LOOP
        SELECT x.visible_ms INTO head FROM ocd_messages x
        WHERE x.queue = q AND x.grp = g ORDER BY x.fseq LIMIT 1;
        IF NOT FOUND THEN
          DELETE FROM ocd_groups o WHERE o.queue = q AND o.grp = g;
        ELSE
          INSERT INTO ocd_groups AS o (queue, grp, ready_ms) VALUES (q, g, head)
          ON CONFLICT (queue, grp) DO UPDATE SET ready_ms = excluded.ready_ms;
        END IF;
      END LOOP;
    END
    $fn$;
    -- An ack-only settle of a FIFO queue in one round trip: under the queue's FIFO lock,
    -- delete, count, refresh the groups, and wake the queue's consumers.
    CREATE FUNCTION ocd_fifo_ack(q bigint, seqs bigint[], shard smallint) RETURNS bigint
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      groups text[];
      n bigint;
      b bigint;
    BEGIN
      PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK
      WITH d AS (
        DELETE FROM ocd_messages x WHERE x.seq = ANY (seqs) AND x.queue + 0 = q
        RETURNING x.size, x.grp)
      SELECT count(*), coalesce(sum(d.size), 0),
             array_agg(DISTINCT d.grp) FILTER (WHERE d.grp IS NOT NULL)
      INTO n, b, groups FROM d;
      IF n > 0 THEN
        INSERT INTO ocd_counts AS c (queue, shard, count, bytes) VALUES (q, shard, -n, -b)
        ON CONFLICT (queue, shard) DO UPDATE
        SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes;
      END IF;
      IF groups IS NOT NULL THEN
        PERFORM ocd_fifo_refresh(q, groups);
      END IF;
      PERFORM pg_notify('ocd_q_' || q, '');
      RETURN n;
    END
    $fn$;
    -- The messages of a lease right behind one of its group (a claim leases a consecutive
    -- run and only acks delete inside it): stops at the first message of another lease.
    CREATE FUNCTION ocd_fifo_behind(q bigint, g text, after bigint, lease_id bigint)
    RETURNS SETOF bigint LANGUAGE plpgsql AS $fn$
    DECLARE
      m record;
    BEGIN
      FOR m IN SELECT x.seq, x.lease FROM ocd_messages x
               WHERE x.queue = q AND x.grp = g AND x.fseq > after ORDER BY x.fseq LIMIT 1000 LOOP
        EXIT WHEN m.lease IS DISTINCT FROM lease_id;
        RETURN NEXT m.seq;
      END LOOP;
    END
    $fn$;
    """,
    """
    -- Cron triggers: the last tick of each schedule claimed to run, and by which node.
    CREATE TABLE ocd_cron_ticks (
        schedule text   PRIMARY KEY,
        due_ms   bigint NOT NULL,
        node     text   NOT NULL
    );
    """,
    """
    -- What the SQS endpoint keeps and ocd's settings do not: per message its attributes
    -- (an opaque blob), per queue its tags and its unmapped SQS attributes (JSON objects).
    ALTER TABLE ocd_messages ADD COLUMN attrs bytea;
    ALTER TABLE ocd_queues ADD COLUMN sqs_attrs text, ADD COLUMN tags text;
    -- The FIFO claim returns the attributes too (a new result type: dropped and made again).
    DROP FUNCTION ocd_fifo_claim(bigint, bigint, integer, bigint, bigint, smallint, text);
    CREATE FUNCTION ocd_fifo_claim(q bigint, now_ms bigint, n integer, until_ms bigint,
                                   lease_id bigint, kind smallint, node text)
    RETURNS TABLE (seq bigint, id text, content_type text, body bytea, sent_ms bigint,
                   attempts integer, grp text, fseq bigint, dedup text, attrs bytea,
                   ord bigint)
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      g record;
      m record;
      picked bigint[] := '{}';
      taken text[] := '{}';
      stale text[] := '{}';
      k integer := 0;
      took boolean;
    BEGIN
      PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK, for the transaction
      FOR g IN SELECT o.grp FROM ocd_groups o
               WHERE o.queue = q AND o.ready_ms <= now_ms ORDER BY o.ready_ms LIMIT n LOOP
        took := false;
        FOR m IN SELECT x.seq, x.visible_ms FROM ocd_messages x
                 WHERE x.queue = q AND x.grp = g.grp ORDER BY x.fseq LIMIT n - k LOOP
          EXIT WHEN m.visible_ms > now_ms;
          picked := picked || m.seq;
          k := k + 1;
          took := true;
        END LOOP;
        IF took THEN taken := taken || g.grp; ELSE stale := stale || g.grp; END IF;
        EXIT WHEN k >= n;
      END LOOP;
      IF cardinality(stale) > 0 THEN PERFORM ocd_fifo_refresh(q, stale); END IF;
      UPDATE ocd_groups o SET ready_ms = until_ms WHERE o.queue = q AND o.grp = ANY (taken);
      RETURN QUERY
        UPDATE ocd_messages x
        SET attempts = x.attempts + 1, visible_ms = until_ms, lease = lease_id,
            lease_kind = kind, owner = node
        FROM unnest(picked) WITH ORDINALITY AS p (s, o)
        WHERE x.seq = p.s AND x.queue + 0 = q
        RETURNING x.seq, x.id, x.content_type, x.body, x.sent_ms, x.attempts, x.grp, x.fseq,
                  x.dedup, x.attrs, p.o;
    END
    $fn$;
    """,
    """
    -- Bulk move tasks (redrives and deletes), so that one survives a restart: its bound
    -- and cursor as (send time, seq), its progress, and the node running it.
    CREATE TABLE ocd_move_tasks (
        task_id        text    PRIMARY KEY,
        account        text    NOT NULL,
        source_id      text    NOT NULL,
        source         text    NOT NULL,
        destination_id text,
        destination    text,
        total          bigint  NOT NULL,
        started_ms     bigint  NOT NULL,
        done           bigint  NOT NULL DEFAULT 0,
        state          text    NOT NULL,
        error          text,
        finished_ms    bigint,
        rate           integer,
        bound_sent     bigint,
        bound_seq      bigint,
        cursor_sent    bigint,
        cursor_seq     bigint,
        spec           text    NOT NULL,
        node           text    NOT NULL
    );
    -- one active redrive per source queue
    CREATE UNIQUE INDEX ocd_move_tasks_active ON ocd_move_tasks (source_id)
        WHERE destination_id IS NOT NULL AND state IN ('running', 'cancelling');
    """,
    """
    -- When a claim first leased each message (SQS's ApproximateFirstReceiveTimestamp); the
    -- FIFO claim sets and returns it too (a new result type: dropped and made again).
    ALTER TABLE ocd_messages ADD COLUMN first_received_ms bigint;
    DROP FUNCTION ocd_fifo_claim(bigint, bigint, integer, bigint, bigint, smallint, text);
    CREATE FUNCTION ocd_fifo_claim(q bigint, now_ms bigint, n integer, until_ms bigint,
                                   lease_id bigint, kind smallint, node text)
    RETURNS TABLE (seq bigint, id text, content_type text, body bytea, sent_ms bigint,
                   attempts integer, grp text, fseq bigint, dedup text, attrs bytea,
                   first_received_ms bigint, ord bigint)
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      g record;
      m record;
      picked bigint[] := '{}';
      taken text[] := '{}';
      stale text[] := '{}';
      k integer := 0;
      took boolean;
    BEGIN
      PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK, for the transaction
      FOR g IN SELECT o.grp FROM ocd_groups o
               WHERE o.queue = q AND o.ready_ms <= now_ms ORDER BY o.ready_ms LIMIT n LOOP
        took := false;
        FOR m IN SELECT x.seq, x.visible_ms FROM ocd_messages x
                 WHERE x.queue = q AND x.grp = g.grp ORDER BY x.fseq LIMIT n - k LOOP
          EXIT WHEN m.visible_ms > now_ms;
          picked := picked || m.seq;
          k := k + 1;
          took := true;
        END LOOP;
        IF took THEN taken := taken || g.grp; ELSE stale := stale || g.grp; END IF;
        EXIT WHEN k >= n;
      END LOOP;
      IF cardinality(stale) > 0 THEN PERFORM ocd_fifo_refresh(q, stale); END IF;
      UPDATE ocd_groups o SET ready_ms = until_ms WHERE o.queue = q AND o.grp = ANY (taken);
      RETURN QUERY
        UPDATE ocd_messages x
        SET attempts = x.attempts + 1, visible_ms = until_ms, lease = lease_id,
            lease_kind = kind, owner = node,
            first_received_ms = coalesce(x.first_received_ms, now_ms)
        FROM unnest(picked) WITH ORDINALITY AS p (s, o)
        WHERE x.seq = p.s AND x.queue + 0 = q
        RETURNING x.seq, x.id, x.content_type, x.body, x.sent_ms, x.attempts, x.grp, x.fseq,
                  x.dedup, x.attrs, x.first_received_ms, p.o;
    END
    $fn$;
    """,
)

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


# ------------------------------------------------------------------ FIFO queues (fifo.py)

# Every change to a FIFO queue's messages holds this lock (class, queue key) for its
# transaction: sends, claims and settles of one FIFO queue are serial across every node, so
# each sees the groups, sequence numbers and deduplication ids the last one left.
FIFO_LOCK = 0x6F636423  # 1868784675: the functions of MIGRATIONS[2] take it by that number

FIFO_LAST_SEQ = "SELECT fifo_seq FROM ocd_queues WHERE key = $1"

DEDUP_FIND = """
SELECT d.scope, d.dedup, d.message_id, d.fseq
FROM unnest($2::text[], $3::text[]) AS k (scope, dedup)
JOIN ocd_dedup d ON d.queue = $1 AND d.scope = k.scope AND d.dedup = k.dedup
"""

# A FIFO send in one statement: the deduplication ids not seen in the window ($12: now) are
# taken (a lapsed one is taken over), only their messages are inserted, under the sequence
# numbers given beforehand ($10; a duplicate's number is left unused), with their counts,
# groups and the queue's last sequence number; returns the ids taken.
FIFO_ENQUEUE = f"""
WITH d AS (
  INSERT INTO ocd_dedup AS o (queue, scope, dedup, expires_ms, message_id, fseq)
  SELECT $1, * FROM unnest($11::text[], $9::text[], $13::bigint[], $2::text[], $10::bigint[])
  ON CONFLICT (queue, scope, dedup) DO UPDATE
  SET expires_ms = excluded.expires_ms, message_id = excluded.message_id, fseq = excluded.fseq
  WHERE o.expires_ms <= $12
  RETURNING fseq),
ins AS (
  INSERT INTO ocd_messages (queue, id, content_type, body, size, sent_ms, visible_ms, grp,
                            dedup, fseq, attrs)
  SELECT $1, m.* FROM unnest($2::text[], $3::text[], $4::bytea[], $5::integer[],
                             $6::bigint[], $7::bigint[], $8::text[], $9::text[],
                             $10::bigint[], $16::bytea[]) AS m (id, ct, body, size, sent,
                                                                visible, grp, dedup, fseq,
                                                                attrs)
  WHERE m.fseq IN (SELECT fseq FROM d)
  RETURNING size, grp, visible_ms, fseq),
c AS (
  {count_change("ins", "$1", "$14", "")}),
g AS (
  INSERT INTO ocd_groups (queue, grp, ready_ms)
  SELECT DISTINCT ON (grp) $1::bigint, grp, visible_ms FROM ins ORDER BY grp, fseq
  ON CONFLICT (queue, grp) DO NOTHING),
s AS (
  UPDATE ocd_queues SET fifo_seq = $15 WHERE key = $1)
SELECT fseq FROM d
"""

FIFO_CLAIM = """
SELECT seq, id, content_type, body, sent_ms, attempts, grp, fseq, dedup, attrs, first_received_ms
FROM ocd_fifo_claim($1, $2, $3, $4, $5, $6::smallint, $7) ORDER BY ord
"""

FIFO_REFRESH = "SELECT ocd_fifo_refresh($1, $2::text[])"

FIFO_ACK = "SELECT ocd_fifo_ack($1, $2::bigint[], $3::smallint)"

FIFO_INFO = """
SELECT seq, grp, fseq, lease FROM ocd_messages WHERE seq = ANY($2::bigint[]) AND queue + 0 = $1
"""

FIFO_BEHIND = """
SELECT s FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS f (g, after, lease),
     LATERAL ocd_fifo_behind($1, f.g, f.after, f.lease) AS s
"""

# Deletes by seq, keeping the counts: the groups of the deleted messages.
FIFO_DELETE_SEQS = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE seq = ANY($2::bigint[]) AND queue + 0 = $1
  RETURNING size, grp),
c AS (
  {count_change("d", "$1", "$3", "-")})
SELECT grp FROM d
"""

RELEASE_ANY = """
UPDATE ocd_messages
SET attempts = greatest(attempts - 1, 0), visible_ms = $2, lease = NULL, lease_kind = NULL,
    owner = NULL
WHERE seq = ANY($3::bigint[]) AND queue + 0 = $1 AND lease IS NOT NULL
"""

# Same id, timestamp and group in the FIFO dead-letter queue ($2), under its next sequence
# numbers in the order of the source's.
FIFO_MOVE = f"""
WITH src AS (
  SELECT seq, row_number() OVER (ORDER BY fseq, seq) AS n FROM ocd_messages
  WHERE seq = ANY($4::bigint[]) AND queue + 0 = $1),
top AS (SELECT fifo_seq FROM ocd_queues WHERE key = $2),
mv AS (
  UPDATE ocd_messages m
  SET queue = $2, attempts = 0, visible_ms = $3, lease = NULL, lease_kind = NULL,
      owner = NULL, fseq = top.fifo_seq + src.n, first_received_ms = NULL
  FROM src, top WHERE m.seq = src.seq
  RETURNING m.size, m.grp),
a AS (
  {count_change("mv", "$1", "$5", "-")}),
b AS (
  {count_change("mv", "$2", "$5", "")}),
s AS (
  UPDATE ocd_queues SET fifo_seq = fifo_seq + (SELECT count(*) FROM mv) WHERE key = $2),
g AS (
  INSERT INTO ocd_groups (queue, grp, ready_ms) SELECT DISTINCT $2::bigint, grp, $3::bigint FROM mv
  ON CONFLICT (queue, grp) DO NOTHING)
SELECT count(*) FROM mv
"""

FIFO_EXPIRE = f"""
WITH d AS (
  DELETE FROM ocd_messages WHERE seq IN (
    SELECT seq FROM ocd_messages WHERE queue = $1 AND sent_ms < $2 LIMIT $3)
  RETURNING size, grp),
c AS (
  {count_change("d", "$1", "$4", "-")})
SELECT grp FROM d
"""

DEDUP_PRUNE = """
DELETE FROM ocd_dedup WHERE ctid IN (
  SELECT ctid FROM ocd_dedup WHERE expires_ms <= $1 LIMIT $2)
"""
DEDUP_CLEAR = "DELETE FROM ocd_dedup WHERE queue = $1"

# After a purge: the groups of the messages sent since it began, from scratch.
GROUPS_CLEAR = "DELETE FROM ocd_groups WHERE queue = $1"
GROUPS_REBUILD = """
INSERT INTO ocd_groups (queue, grp, ready_ms)
SELECT DISTINCT ON (grp) $1, grp, visible_ms FROM ocd_messages
WHERE queue = $1 AND grp IS NOT NULL ORDER BY grp, fseq
"""

READY_FIFO = """
SELECT
  (SELECT count(*) FROM (
     SELECT 1 FROM (SELECT grp FROM ocd_groups WHERE queue = $1 AND ready_ms <= $2
                    ORDER BY ready_ms LIMIT $3) AS g
     CROSS JOIN LATERAL (SELECT 1 FROM ocd_messages
                         WHERE queue = $1 AND grp = g.grp AND visible_ms <= $2
                         ORDER BY fseq LIMIT $3) AS m
     LIMIT $3) AS r),
  (SELECT min(ready_ms) FROM ocd_groups WHERE queue = $1 AND ready_ms <= $2),
  (SELECT min(ready_ms) FROM ocd_groups WHERE queue = $1 AND ready_ms > $2)
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
