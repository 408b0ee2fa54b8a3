-- A message sent to a standard queue and appended at once, in send order, needs no index on
-- its send time: its queue's ready band already keeps those messages in send order (seq
-- order). Only the others are indexed by send time: "late" rows, which a delay, a retry, a
-- lapsed lease, a hand-back, a move or a dead-letter appended after messages sent later, a
-- send whose clock read less than one appended before it (another node's clock, a clock
-- step), and every FIFO message (its seq comes from the serial, not from its queue's bands).
-- A standard message sent and acked in order writes one B-tree entry (its primary key), not
-- two.
--
-- So a row in order was sent no earlier than any row appended to its queue before it (in
-- either band, late or not). The queue's tail row keeps the greatest send time of the rows
-- appended to it (floor_ms) and, for the send statement that moves it, what it was before
-- (was_ms), so that statement can tell which of its rows are late; a move from another
-- queue raises it too. Every writer but a standard send leaves late at its default.
-- Readers in send time order (browse, search, retention, the oldest message) merge the ready
-- band in seq order with the late index (sql.py).
ALTER TABLE ocd_messages ADD COLUMN late boolean NOT NULL DEFAULT true;
ALTER TABLE ocd_tails ADD COLUMN floor_ms bigint NOT NULL DEFAULT 0,
                      ADD COLUMN was_ms bigint NOT NULL DEFAULT 0;
UPDATE ocd_tails t SET floor_ms = coalesce(
  (SELECT max(m.sent_ms) FROM ocd_messages m WHERE m.queue = t.queue), 0);
-- Rows that may be in order: standard rows of a ready band sent no earlier than any row
-- before them in it (the rows written before this schema, and those migrate-store copied).
-- Only the ready band matters: the delayed band's rows are all late.
CREATE FUNCTION ocd_relabel() RETURNS void
LANGUAGE sql AS $fn$
  UPDATE ocd_messages m SET late = false
  FROM (SELECT x.seq, x.sent_ms >= coalesce(max(x.sent_ms) OVER (
                 PARTITION BY x.seq >> 40 ORDER BY x.seq
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS ok
        FROM ocd_messages x
        WHERE x.seq >= 1::bigint << 40 AND x.seq & (1::bigint << 39) = 0
          AND x.grp IS NULL) AS r
  WHERE m.seq = r.seq AND r.ok AND m.late;
$fn$;
SELECT ocd_relabel();
CREATE INDEX ocd_messages_late ON ocd_messages (queue, sent_ms, seq) WHERE late;
DROP INDEX ocd_messages_sent;

-- Readers see whether a row is late (browse merges the two orders).
CREATE OR REPLACE VIEW ocd_message_states AS
SELECT m.seq, m.queue, m.id, m.content_type, m.body, m.size, m.sent_ms, m.grp, m.dedup,
       m.fseq, m.attrs,
       coalesce(o.visible_ms, h.until_ms, l.deadline_ms, m.visible_ms) AS visible_ms,
       CASE WHEN o.seq IS NOT NULL THEN o.attempts
            WHEN h.seq IS NOT NULL THEN h.attempts
            WHEN l.lease IS NOT NULL THEN m.attempts + 1
            ELSE m.attempts END AS attempts,
       CASE WHEN o.seq IS NOT NULL THEN o.lease ELSE coalesce(m.lease, l.lease) END AS lease,
       CASE WHEN o.seq IS NOT NULL THEN o.first_received_ms
            WHEN h.seq IS NOT NULL THEN h.first_received_ms
            WHEN l.lease IS NOT NULL THEN coalesce(m.first_received_ms, l.claimed_ms)
            ELSE m.first_received_ms END AS first_received_ms,
       m.late
FROM ocd_messages m
LEFT JOIN ocd_fifo_order o ON m.grp IS NOT NULL AND o.queue = m.queue AND o.grp = m.grp
  AND o.fseq = m.fseq
LEFT JOIN ocd_held h ON h.seq = m.seq
LEFT JOIN LATERAL (
  SELECT x.lease, x.lo, x.claimed_ms, x.deadline_ms FROM ocd_leases x
  WHERE x.queue = m.queue AND x.hi >= m.seq AND m.grp IS NULL AND h.seq IS NULL
  ORDER BY x.hi LIMIT 1) AS l ON l.lo <= m.seq;

-- The first seq at or after lo and before hi of a row of queue q in order (not late) whose
-- (sent_ms, seq) is at least (at_ms, at_seq); hi if none. A binary search over the band by
-- primary key probes: rows in order are in send time order.
CREATE FUNCTION ocd_seek(q bigint, lo bigint, hi bigint, at_ms bigint, at_seq bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  a bigint := lo;
  b bigint := hi;
  mid bigint;
  s bigint;
  t bigint;
BEGIN
  WHILE a < b LOOP
    mid := a + (b - a) / 2;
    SELECT m.seq, m.sent_ms INTO s, t FROM ocd_messages m
    WHERE m.seq = (SELECT min(x.seq) FROM ocd_messages x
                   WHERE x.seq >= mid AND x.seq < b AND NOT x.late);
    IF s IS NULL THEN
      b := mid;
    ELSIF (t, s) >= (at_ms, at_seq) THEN
      b := mid;
      hi := s;
    ELSE
      a := s + 1;
    END IF;
  END LOOP;
  RETURN hi;
END
$fn$;

-- ocd_reappend as in 0010_log.sql, but messages appended from another queue raise its floor.
CREATE OR REPLACE FUNCTION ocd_reappend(src bigint, seqs bigint[], vis bigint, plus integer,
                                        first_ms bigint, dest bigint, sh smallint)
RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
  base bigint;
  moved bigint;
  bytes_moved bigint;
  top bigint;
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
    RETURNING size, sent_ms)
  SELECT count(*), coalesce(sum(ins.size), 0), max(ins.sent_ms) INTO moved, bytes_moved, top
  FROM ins;
  IF moved > 0 AND dest <> src THEN
    INSERT INTO ocd_counts AS c (queue, shard, count, bytes)
    VALUES (src, sh, -moved, -bytes_moved), (dest, sh, moved, bytes_moved)
    ON CONFLICT (queue, shard) DO UPDATE
    SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes;
    UPDATE ocd_tails SET floor_ms = greatest(floor_ms, top) WHERE queue = dest;
  END IF;
  IF moved > 0 THEN
    PERFORM pg_notify('ocd_q_' || dest, '');
  END IF;
  RETURN moved;
END
$fn$;
