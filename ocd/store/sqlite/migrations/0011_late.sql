-- A message sent to a standard queue and appended at once, in send order, needs no index on
-- its send time: its queue's ready band already keeps those messages in send order (seq
-- order). Only the others are indexed by send time: "late" rows, which a delay, a retry, a
-- lapsed lease, a hand-back, a move or a dead-letter appended after messages sent later, a
-- send whose clock read less than one appended before it (a clock step), a FIFO group
-- compacted. A message sent and acked in order writes one B-tree entry (its rowid) for its
-- send time, not two.
--
-- So a row in order was sent no earlier than any row appended to its band before it. The
-- queue's cursor row keeps the greatest send time of the rows sent or moved to it
-- (floor_ms) and, for the send that moves it, what it was before (was_ms), so that the send
-- can tell which of its rows are late. Every writer but a send leaves late at its default.
-- Readers in send time order (browse, search, retention, the oldest message) merge the
-- ready band in seq order with the late index (sql.py).
ALTER TABLE messages ADD COLUMN late INTEGER NOT NULL DEFAULT 1;
ALTER TABLE cursors ADD COLUMN floor_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cursors ADD COLUMN was_ms INTEGER NOT NULL DEFAULT 0;
UPDATE cursors SET floor_ms = coalesce(
  (SELECT max(m.sent_ms) FROM messages m WHERE m.seq >= cursors.queue << 40
     AND m.seq < (cursors.queue + 1) << 40), 0);
-- Rows that may be in order: rows of a ready band (FIFO rows, dead or alive, are in their
-- queue's band too) sent no earlier than any row before them in it. The delayed band's rows
-- are all late.
UPDATE messages SET late = 0 WHERE seq IN (
  SELECT seq FROM (
    SELECT x.seq, x.sent_ms >= coalesce(max(x.sent_ms) OVER (
             PARTITION BY x.seq >> 40 ORDER BY x.seq
             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS ok
    FROM messages x
    WHERE x.seq >= 1 << 40 AND x.seq & (1 << 39) = 0)
  WHERE ok);
CREATE INDEX messages_late ON messages (queue, sent_ms) WHERE late;
DROP INDEX messages_sent;

-- Readers see whether a row is late (browse merges the two orders).
DROP VIEW message_states;
CREATE VIEW message_states AS
SELECT m.seq, m.queue, m.id, m.content_type, m.body, m.size, m.sent_ms, m.grp, m.dedup,
       m.fseq, m.attrs,
       coalesce(o.visible_ms, h.until_ms, l.deadline_ms, m.visible_ms) AS visible_ms,
       CASE WHEN o.seq IS NOT NULL THEN o.attempts
            WHEN h.seq IS NOT NULL THEN h.attempts
            WHEN l.lease IS NOT NULL THEN m.attempts + 1
            ELSE m.attempts END AS attempts,
       coalesce(o.lease, l.lease) AS lease,
       CASE WHEN o.seq IS NOT NULL THEN o.first_received_ms
            WHEN h.seq IS NOT NULL THEN h.first_received_ms
            WHEN l.lease IS NOT NULL THEN coalesce(m.first_received_ms, l.claimed_ms)
            ELSE m.first_received_ms END AS first_received_ms,
       m.late
FROM messages m
LEFT JOIN fifo_order o ON m.grp IS NOT NULL AND o.queue = m.queue AND o.grp = m.grp
  AND o.fseq = m.fseq
LEFT JOIN held h ON m.grp IS NULL AND h.seq = m.seq
LEFT JOIN leases l ON m.grp IS NULL AND h.seq IS NULL
  AND l.lease = (SELECT lease FROM leases WHERE queue = m.queue AND hi >= m.seq ORDER BY hi LIMIT 1)
  AND l.lo <= m.seq
WHERE m.grp IS NULL OR o.seq = m.seq;
