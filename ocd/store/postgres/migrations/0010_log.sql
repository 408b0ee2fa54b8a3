-- Standard queues as a log (docs/design/postgres-log.md): a message row is written once and
-- deleted once. A queue numbers its messages in its own range of seq, key << 40: the ready
-- band (bit 39 clear) in delivery order, read from the queue's cursor on; the delayed band
-- (bit 39 set) for messages that wait. A claim takes a run of the ready band and writes one
-- lease row; a retry, a delay that ends and a lease that lapses append the message anew and
-- delete the old row. FIFO queues keep their own columns and the group index, and their
-- seqs from the serial.
--
-- The tail (numbers given) and the cursor (first unclaimed) are separate rows: a send holds
-- its queue's tail row lock until it commits, so one queue's seqs commit in seq order, and a
-- claim (which holds the cursor row) reads a prefix of what is committed. Neither row has an
-- index on what changes, and both leave room on their pages: every update is HOT.
CREATE TABLE ocd_tails (
    queue bigint PRIMARY KEY REFERENCES ocd_queues (key) ON DELETE CASCADE,
    tail  bigint NOT NULL DEFAULT 0,  -- numbers given in the ready band (never reused)
    dtail bigint NOT NULL DEFAULT 0   -- numbers given in the delayed band
) WITH (fillfactor = 50);
CREATE TABLE ocd_cursors (
    queue    bigint PRIMARY KEY REFERENCES ocd_queues (key) ON DELETE CASCADE,
    next_seq bigint NOT NULL  -- the first seq of the ready band not claimed yet
) WITH (fillfactor = 50);
ALTER TABLE ocd_tails SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
ALTER TABLE ocd_cursors SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
-- One row per claimed batch: its run [lo, hi] of the ready band, kind, owner (the node of a
-- PUSH lease), claim time (the first receive of messages claimed for the first time) and
-- deadline. No foreign key (a check and a lock of the queue's row per batch): deleting a
-- queue deletes its rows (sql.DELETE_QUEUE).
CREATE TABLE ocd_leases (
    lease       bigint   PRIMARY KEY,
    queue       bigint   NOT NULL,
    lo          bigint   NOT NULL,
    hi          bigint   NOT NULL,
    kind        smallint NOT NULL,
    owner       text,
    claimed_ms  bigint   NOT NULL,
    deadline_ms bigint   NOT NULL
);
CREATE INDEX ocd_leases_run ON ocd_leases (queue, hi);
CREATE INDEX ocd_leases_deadline ON ocd_leases (queue, deadline_ms);
CREATE INDEX ocd_leases_owner ON ocd_leases (owner) WHERE owner IS NOT NULL;
ALTER TABLE ocd_leases SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
-- Messages that wait outside the ready band: delayed sends, retries, leases made longer for
-- one message. Due, they are appended to the ready band with these attempts.
CREATE TABLE ocd_held (
    seq               bigint  PRIMARY KEY,
    queue             bigint  NOT NULL,
    until_ms          bigint  NOT NULL,
    attempts          integer NOT NULL,
    first_received_ms bigint
);
CREATE INDEX ocd_held_due ON ocd_held (queue, until_ms);

-- Seqs at the tail of a band of queue q: the first of n new ones. The tail row stays locked
-- until the transaction ends.
CREATE FUNCTION ocd_take(q bigint, n bigint, delayed boolean) RETURNS bigint
LANGUAGE sql AS $fn$
  INSERT INTO ocd_tails AS t (queue, tail, dtail)
  VALUES (q, CASE WHEN delayed THEN 0 ELSE n END, CASE WHEN delayed THEN n ELSE 0 END)
  ON CONFLICT (queue) DO UPDATE SET tail = t.tail + excluded.tail, dtail = t.dtail + excluded.dtail
  RETURNING (q << 40) + CASE WHEN delayed THEN (1::bigint << 39) + t.dtail ELSE t.tail END - n;
$fn$;

-- Append messages of src anew at the tail of dest's ready band, in the order given, and
-- delete the old rows and their held rows. Only the rows this statement deletes are
-- appended: of an ack and a re-append racing for a message, the one that commits first
-- wins. Within one queue plus attempts are counted and first_ms is the first receive where
-- there was none; into another queue both start again (and the counts move, in shard sh).
CREATE FUNCTION ocd_reappend(src bigint, seqs bigint[], vis bigint, plus integer,
                             first_ms bigint, dest bigint, sh smallint) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
  base bigint;
  moved bigint;
  bytes_moved bigint;
BEGIN
  IF seqs IS NULL OR cardinality(seqs) = 0 THEN
    RETURN 0;
  END IF;
  base := ocd_take(dest, cardinality(seqs), false);
  WITH p AS (
    SELECT x.s, min(x.o) AS o FROM unnest(seqs) WITH ORDINALITY AS x (s, o) GROUP BY x.s),
  d AS (
    DELETE FROM ocd_messages m USING p WHERE m.seq = p.s AND m.queue + 0 = src
    RETURNING m.seq, m.id, m.content_type, m.body, m.size, m.sent_ms, m.attempts,
              m.first_received_ms, m.attrs, p.o),
  h AS (
    DELETE FROM ocd_held x WHERE x.seq IN (SELECT d.seq FROM d)),
  ins AS (
    INSERT INTO ocd_messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms,
                              attempts, first_received_ms, attrs)
    SELECT base + d.o - 1, dest, d.id, d.content_type, d.body, d.size, d.sent_ms, vis,
           CASE WHEN dest = src THEN d.attempts + plus ELSE 0 END,
           CASE WHEN dest = src THEN coalesce(d.first_received_ms, first_ms) END, d.attrs
    FROM d
    RETURNING size)
  SELECT count(*), coalesce(sum(ins.size), 0) INTO moved, bytes_moved FROM ins;
  IF moved > 0 AND dest <> src THEN
    INSERT INTO ocd_counts AS c (queue, shard, count, bytes)
    VALUES (src, sh, -moved, -bytes_moved), (dest, sh, moved, bytes_moved)
    ON CONFLICT (queue, shard) DO UPDATE
    SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes;
  END IF;
  IF moved > 0 THEN
    PERFORM pg_notify('ocd_q_' || dest, '');
  END IF;
  RETURN moved;
END
$fn$;

-- The held messages of q that are due, appended to the ready band with the attempts and
-- first receive kept in their held rows (a held row whose message went: just dropped).
CREATE FUNCTION ocd_promote(q bigint, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
  batch bigint[];
  base bigint;
  total bigint := 0;
BEGIN
  LOOP
    SELECT array_agg(x.seq ORDER BY x.until_ms, x.seq) INTO batch FROM (
      SELECT h.seq, h.until_ms FROM ocd_held h WHERE h.queue = q AND h.until_ms <= now_ms
      ORDER BY h.until_ms, h.seq LIMIT 1000) AS x;
    EXIT WHEN batch IS NULL;
    base := ocd_take(q, cardinality(batch), false);
    WITH p AS (SELECT x.s, x.o FROM unnest(batch) WITH ORDINALITY AS x (s, o)),
    d AS (
      DELETE FROM ocd_messages m USING p, ocd_held h
      WHERE m.seq = p.s AND h.seq = p.s AND m.queue + 0 = q
      RETURNING m.id, m.content_type, m.body, m.size, m.sent_ms, m.attrs, p.o,
                h.until_ms, h.attempts, h.first_received_ms)
    INSERT INTO ocd_messages (seq, queue, id, content_type, body, size, sent_ms, visible_ms,
                              attempts, first_received_ms, attrs)
    SELECT base + d.o - 1, q, d.id, d.content_type, d.body, d.size, d.sent_ms, d.until_ms,
           d.attempts, d.first_received_ms, d.attrs
    FROM d;
    -- then the held rows, orphans too (their message acked or re-appended meanwhile)
    DELETE FROM ocd_held x WHERE x.seq = ANY (batch) AND x.queue = q;
    total := total + cardinality(batch);
    EXIT WHEN cardinality(batch) < 1000;
  END LOOP;
  IF total > 0 THEN
    PERFORM pg_notify('ocd_q_' || q, '');
  END IF;
  RETURN total;
END
$fn$;

-- A lease of q ends with messages still under it (not settled, not held apart): they are
-- appended anew, plus attempts counted (1: the lapsed claim's attempt stays spent; 0: handed
-- back), visible at the lease's deadline or now. The tail is locked first, as every append
-- does, then the lease row: of racing lapses, reaps and returns one ends it.
CREATE FUNCTION ocd_end_lease(q bigint, lid bigint, now_ms bigint, plus integer,
                              at_deadline boolean) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
  l record;
  batch bigint[];
BEGIN
  PERFORM ocd_take(q, 0, false);
  DELETE FROM ocd_leases x WHERE x.lease = lid AND x.queue = q
  RETURNING x.lo, x.hi, x.claimed_ms, x.deadline_ms INTO l;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  SELECT array_agg(m.seq ORDER BY m.seq) INTO batch FROM ocd_messages m
  WHERE m.seq BETWEEN l.lo AND l.hi AND m.queue + 0 = q
    AND NOT EXISTS (SELECT 1 FROM ocd_held h WHERE h.seq = m.seq);
  RETURN ocd_reappend(q, batch, CASE WHEN at_deadline THEN l.deadline_ms ELSE now_ms END,
                      plus, l.claimed_ms, q, 0::smallint);
END
$fn$;

-- A claim: under the queue's cursor row, append what is due (held messages, lapsed leases),
-- then take the run of the ready band from the cursor under one new lease. Each statement
-- of a function takes a new snapshot, so the run is read after the cursor lock was granted.
-- Attempts come back counted with this claim, first receives set. Its statements read by
-- primary key or a queue's small lease and held ranges, so they keep a generic plan instead
-- of the pool sessions' planning of every execution (about 6% of the server's CPU a message).
CREATE FUNCTION ocd_claim(q bigint, now_ms bigint, n integer, until_ms bigint,
                          lease_id bigint, lkind smallint, node text)
RETURNS TABLE (seq bigint, id text, content_type text, body bytea, sent_ms bigint,
               attempts integer, attrs bytea, first_received_ms bigint)
LANGUAGE plpgsql SET plan_cache_mode = auto AS $fn$
#variable_conflict use_column
DECLARE
  start_seq bigint;
  l record;
BEGIN
  SELECT c.next_seq INTO start_seq FROM ocd_cursors c WHERE c.queue = q FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO ocd_cursors (queue, next_seq) VALUES (q, q << 40) ON CONFLICT (queue) DO NOTHING;
    SELECT c.next_seq INTO start_seq FROM ocd_cursors c WHERE c.queue = q FOR UPDATE;
  END IF;
  IF EXISTS (SELECT 1 FROM ocd_held h WHERE h.queue = q AND h.until_ms <= now_ms) THEN
    PERFORM ocd_promote(q, now_ms);
  END IF;
  FOR l IN SELECT x.lease FROM ocd_leases x WHERE x.queue = q AND x.deadline_ms <= now_ms
           ORDER BY x.deadline_ms LIMIT 1000 LOOP
    PERFORM ocd_end_lease(q, l.lease, now_ms, 1, true);
  END LOOP;
  RETURN QUERY
    WITH run AS (
      SELECT m.seq, m.id, m.content_type, m.body, m.sent_ms, m.attempts, m.attrs,
             m.first_received_ms
      FROM ocd_messages m
      WHERE m.seq >= start_seq AND m.seq < (q << 40) + (1::bigint << 39) AND m.queue + 0 = q
      ORDER BY m.seq LIMIT n),
    cur AS (
      UPDATE ocd_cursors c SET next_seq = r.top + 1
      FROM (SELECT max(run.seq) AS top FROM run) AS r
      WHERE c.queue = q AND r.top IS NOT NULL),
    ls AS (
      INSERT INTO ocd_leases (lease, queue, lo, hi, kind, owner, claimed_ms, deadline_ms)
      SELECT lease_id, q, min(run.seq), max(run.seq), lkind, node, now_ms, until_ms
      FROM run HAVING count(*) > 0)
    SELECT run.seq, run.id, run.content_type, run.body, run.sent_ms, run.attempts + 1,
           run.attrs, coalesce(run.first_received_ms, now_ms)
    FROM run ORDER BY run.seq;
END
$fn$;

-- Handing back: the messages of seqs under a lease of kind k of q are appended anew, the
-- attempt given back, the first receive from their claim.
CREATE FUNCTION ocd_release(q bigint, seqs bigint[], now_ms bigint, k smallint) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
  r record;
  total bigint := 0;
BEGIN
  PERFORM ocd_take(q, 0, false);
  FOR r IN SELECT l.lease, l.claimed_ms, array_agg(x.s ORDER BY x.s) AS ours
           FROM (SELECT DISTINCT unnest(seqs) AS s) AS x
           CROSS JOIN LATERAL (
             SELECT y.lease, y.lo, y.kind, y.claimed_ms FROM ocd_leases y
             WHERE y.queue = q AND y.hi >= x.s ORDER BY y.hi LIMIT 1) AS l
           WHERE l.lo <= x.s AND l.kind = k
             AND NOT EXISTS (SELECT 1 FROM ocd_held h WHERE h.seq = x.s)
           GROUP BY l.lease, l.claimed_ms ORDER BY l.lease LOOP
    total := total + ocd_reappend(q, r.ours, now_ms, 0, r.claimed_ms, q, 0::smallint);
  END LOOP;
  RETURN total;
END
$fn$;

-- Standard messages not yet in a band (seqs below "below": the serial's, 1 << 40, at this
-- migration; negative ones, 0, the ones migrate-store copied to be numbered anew) into the
-- log, after what their bands gave already. Waiting ones and those a push consumer held (made
-- ready again, their spent attempts kept: at-least-once allows the redelivery) into the
-- ready band in the order they became visible; delayed and retrying ones into the delayed
-- band, held until due. Those under a pull lease keep their seq, so the lease ids their
-- consumers hold still ack them, held until the lease's deadline.
CREATE FUNCTION ocd_relog(below bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO ocd_held (seq, queue, until_ms, attempts, first_received_ms)
  SELECT m.seq, m.queue, m.visible_ms, m.attempts, m.first_received_ms FROM ocd_messages m
  WHERE m.grp IS NULL AND m.lease_kind = 2 AND m.seq < below;
  WITH r AS (
    SELECT m.seq AS old, m.queue,
           (m.lease IS NULL AND m.visible_ms > m.sent_ms) AS delayed,
           row_number() OVER (PARTITION BY m.queue, (m.lease IS NULL AND m.visible_ms > m.sent_ms)
                              ORDER BY m.visible_ms, abs(m.seq)) - 1 AS n
    FROM ocd_messages m
    WHERE m.grp IS NULL AND m.lease_kind IS DISTINCT FROM 2 AND m.seq < below),
  u AS (
    UPDATE ocd_messages m
    SET seq = (r.queue << 40) + r.n
              + CASE WHEN r.delayed THEN (1::bigint << 39) + coalesce(t.dtail, 0)
                     ELSE coalesce(t.tail, 0) END
    FROM r LEFT JOIN ocd_tails t ON t.queue = r.queue WHERE m.seq = r.old
    RETURNING m.seq, m.queue, m.visible_ms, m.attempts, m.first_received_ms, r.delayed),
  h AS (
    INSERT INTO ocd_held (seq, queue, until_ms, attempts, first_received_ms)
    SELECT u.seq, u.queue, u.visible_ms, u.attempts, u.first_received_ms FROM u WHERE u.delayed)
  INSERT INTO ocd_tails AS t (queue, tail, dtail)
  SELECT u.queue, count(*) FILTER (WHERE NOT u.delayed), count(*) FILTER (WHERE u.delayed)
  FROM u GROUP BY u.queue
  ON CONFLICT (queue) DO UPDATE SET tail = t.tail + excluded.tail, dtail = t.dtail + excluded.dtail;
  UPDATE ocd_messages SET lease = NULL, lease_kind = NULL, owner = NULL
  WHERE grp IS NULL AND lease IS NOT NULL;
  INSERT INTO ocd_tails (queue) SELECT key FROM ocd_queues ON CONFLICT (queue) DO NOTHING;
  INSERT INTO ocd_cursors (queue, next_seq) SELECT key, key << 40 FROM ocd_queues
  ON CONFLICT (queue) DO NOTHING;
END
$fn$;

SELECT ocd_relog(1::bigint << 40);

-- Only FIFO messages still change visibility in place.
DROP INDEX ocd_messages_visible;
CREATE INDEX ocd_messages_visible ON ocd_messages (queue, visible_ms) WHERE grp IS NOT NULL;

-- Each message as readers see it (browse, search, peek): a held message waits until its
-- time, a message of a live lease is in flight with that attempt counted, a FIFO message
-- says so in its own columns.
CREATE VIEW ocd_message_states AS
SELECT m.seq, m.queue, m.id, m.content_type, m.body, m.size, m.sent_ms, m.grp, m.dedup,
       m.fseq, m.attrs,
       coalesce(h.until_ms, l.deadline_ms, m.visible_ms) AS visible_ms,
       CASE WHEN h.seq IS NOT NULL THEN h.attempts
            WHEN l.lease IS NOT NULL THEN m.attempts + 1
            ELSE m.attempts END AS attempts,
       coalesce(m.lease, l.lease) AS lease,
       CASE WHEN h.seq IS NOT NULL THEN h.first_received_ms
            WHEN l.lease IS NOT NULL THEN coalesce(m.first_received_ms, l.claimed_ms)
            ELSE m.first_received_ms END AS first_received_ms
FROM ocd_messages m
LEFT JOIN ocd_held h ON h.seq = m.seq
LEFT JOIN LATERAL (
  SELECT x.lease, x.lo, x.claimed_ms, x.deadline_ms FROM ocd_leases x
  WHERE x.queue = m.queue AND x.hi >= m.seq AND m.grp IS NULL AND h.seq IS NULL
  ORDER BY x.hi LIMIT 1) AS l ON l.lo <= m.seq;
