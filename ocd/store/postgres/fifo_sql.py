"""The FIFO queues' SQL statements (``fifo.py`` runs most of them), by name, beside
``sql.py``'s; the same rules of plans hold.
"""

from ocd.store.postgres.sql import count_change

# Every change to a FIFO queue's messages holds this lock (class, queue key) for its
# transaction: sends, claims and settles of one FIFO queue are serial across every node, so
# each sees the groups, sequence numbers and deduplication ids the last one left.
FIFO_LOCK = 0x6F636423  # 1868784675: the functions of migrations/0003_fifo.sql use it

# Locks the queue's row for the send's transaction: a deletion of the queue waits for it
# (or the send finds the queue gone), so that no message is added to a deleted queue.
FIFO_LAST_SEQ = "SELECT fifo_seq FROM ocd_queues WHERE key = $1 FOR NO KEY UPDATE"

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
  RETURNING seq, size, grp, visible_ms, fseq),
o AS (
  INSERT INTO ocd_fifo_order (queue, grp, fseq, seq, visible_ms, attempts)
  SELECT $1, grp, fseq, seq, visible_ms, 0 FROM ins WHERE grp IS NOT NULL),
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

# A FIFO message's changing state is its ocd_fifo_order row's (migration 0011), found from
# its row by (queue, grp, fseq).
_ORDER_OF = "o.queue = m.queue AND o.grp = m.grp AND o.fseq = m.fseq"

FIFO_INFO = f"""
SELECT m.seq, m.grp, m.fseq, o.lease FROM ocd_messages m
LEFT JOIN ocd_fifo_order o ON {_ORDER_OF}
WHERE m.seq = ANY($2::bigint[]) AND m.queue + 0 = $1
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

RELEASE_ANY = f"""
UPDATE ocd_fifo_order o
SET attempts = greatest(o.attempts - 1, 0), visible_ms = $2, lease = NULL, lease_kind = NULL,
    owner = NULL
FROM ocd_messages m
WHERE m.seq = ANY($3::bigint[]) AND m.queue + 0 = $1 AND {_ORDER_OF} AND o.lease IS NOT NULL
"""

# Same id, timestamp and group in the FIFO dead-letter queue ($2), under its next sequence
# numbers in the order of the source's; nothing moves if it was deleted (its row is locked
# first, as a FIFO send's is).
FIFO_MOVE = f"""
WITH src AS (
  SELECT seq, row_number() OVER (ORDER BY fseq, seq) AS n FROM ocd_messages
  WHERE seq = ANY($4::bigint[]) AND queue + 0 = $1),
top AS (SELECT fifo_seq FROM ocd_queues WHERE key = $2 FOR NO KEY UPDATE),
gone AS (
  DELETE FROM ocd_fifo_order o USING ocd_messages m, src
  WHERE m.seq = src.seq AND {_ORDER_OF}),
mv AS (
  UPDATE ocd_messages m
  SET queue = $2, attempts = 0, visible_ms = $3, lease = NULL, lease_kind = NULL,
      owner = NULL, fseq = top.fifo_seq + src.n, first_received_ms = NULL
  FROM src, top WHERE m.seq = src.seq
  RETURNING m.seq, m.size, m.grp, m.fseq),
o AS (
  INSERT INTO ocd_fifo_order (queue, grp, fseq, seq, visible_ms, attempts)
  SELECT $2, grp, fseq, seq, $3, 0 FROM mv WHERE grp IS NOT NULL),
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
  DELETE FROM ocd_messages WHERE queue + 0 = $1 AND seq = ANY(ARRAY(
    SELECT seq FROM ocd_messages WHERE queue = $1 AND late AND sent_ms < $2
    ORDER BY sent_ms LIMIT $3))
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
SELECT DISTINCT ON (grp) $1, grp, visible_ms FROM ocd_fifo_order
WHERE queue = $1 ORDER BY grp, fseq
"""

READY_FIFO = """
SELECT
  (SELECT count(*) FROM (
     SELECT 1 FROM (SELECT grp FROM ocd_groups WHERE queue = $1 AND ready_ms <= $2
                    ORDER BY ready_ms LIMIT $3) AS g
     CROSS JOIN LATERAL (SELECT 1 FROM ocd_fifo_order
                         WHERE queue = $1 AND grp = g.grp AND visible_ms <= $2
                         ORDER BY fseq LIMIT $3) AS m
     LIMIT $3) AS r),
  (SELECT min(ready_ms) FROM ocd_groups WHERE queue = $1 AND ready_ms <= $2),
  (SELECT min(ready_ms) FROM ocd_groups WHERE queue = $1 AND ready_ms > $2)
"""
