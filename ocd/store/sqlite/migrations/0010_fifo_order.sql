-- FIFO queues on the log (docs/architecture.md, "the store as a log"): a FIFO message's row
-- is written once, at its send, and never updated. What changes about it (when it is
-- visible, its attempts, its first receive, its lease) lives in fifo_order, one narrow row a
-- message kept in group order: a claim updates a run of one group's rows, which sit
-- together, instead of a row and two index entries a message scattered in send order. A
-- FIFO message is live while its fifo_order row names its seq.
CREATE TABLE fifo_order (
    queue             INTEGER NOT NULL,
    grp               TEXT    NOT NULL,
    fseq              INTEGER NOT NULL,  -- its place in its group (its sequence number)
    seq               INTEGER NOT NULL,  -- its row in messages
    visible_ms        INTEGER NOT NULL,
    attempts          INTEGER NOT NULL,
    first_received_ms INTEGER,
    lease             INTEGER,
    lease_kind        INTEGER,
    PRIMARY KEY (queue, grp, fseq)
) WITHOUT ROWID;

-- A FIFO message's row is dead once its fifo_order row is gone (acked, retained past,
-- moved on); the dead rows at the front of a queue's band are cut in ranges from the
-- queue's cursors.next, which for a FIFO queue is its cut. That needs a group's rows in
-- the order of their seqs: FIFO rows are numbered anew, per queue in the order of their
-- sequence numbers, at the tail of its band (rows sent before schema 9, or moved into
-- another queue in place, lay outside it). A pull lease id that named one such message
-- no longer does: the message is delivered again when that lease lapses.
INSERT OR IGNORE INTO cursors (queue, next, tail, dtail) SELECT key, key << 40, 0, 0 FROM queues;
UPDATE cursors SET tail = max(tail, coalesce(
  (SELECT max(seq) + 1 - (cursors.queue << 40) FROM messages
   WHERE seq >= cursors.queue << 40 AND seq < (cursors.queue << 40) + (1 << 39)), 0));
CREATE TEMP TABLE refifo AS
SELECT seq AS old, queue, row_number() OVER (PARTITION BY queue ORDER BY fseq) - 1 AS n
FROM messages WHERE grp IS NOT NULL;
-- through negative seqs, so that no new seq meets an old one on the way
UPDATE messages SET seq = -1 - seq WHERE seq IN (SELECT old FROM refifo);
UPDATE messages
SET seq = (SELECT (r.queue << 40) + c.tail + r.n FROM refifo r JOIN cursors c ON c.queue = r.queue
           WHERE r.old = -1 - messages.seq)
WHERE seq < 0;
UPDATE cursors SET tail = tail + (SELECT count(*) FROM refifo r WHERE r.queue = cursors.queue);
DROP TABLE refifo;

INSERT INTO fifo_order (queue, grp, fseq, seq, visible_ms, attempts, first_received_ms, lease,
                        lease_kind)
SELECT queue, grp, fseq, seq, visible_ms, attempts, first_received_ms, lease, lease_kind
FROM messages WHERE grp IS NOT NULL;

-- A group's head row (its lowest seq: the group's rows are in seq order): the lowest of
-- them is where a queue's cut stops.
ALTER TABLE fifo_groups ADD COLUMN head_seq INTEGER;
UPDATE fifo_groups SET head_seq = (SELECT seq FROM fifo_order o WHERE o.queue = fifo_groups.queue
                                   AND o.grp = fifo_groups.grp ORDER BY o.fseq LIMIT 1);
CREATE INDEX fifo_groups_head ON fifo_groups (queue, head_seq);

-- Where a FIFO queue's tail was when its group at the cut could not be moved (fifo.py's
-- compaction): not tried again until as many rows again have come.
ALTER TABLE cursors ADD COLUMN compact_at INTEGER;

-- The group index and the visibility index lived on messages only for FIFO rows.
DROP INDEX messages_group;
DROP INDEX messages_visible;

-- Each message as readers see it (browse, search, export): a held message waits until its
-- time, a message of a live lease is in flight with that attempt counted, a FIFO message
-- as its fifo_order row says (a FIFO row that no order row names is dead: not a message).
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
            ELSE m.first_received_ms END AS first_received_ms
FROM messages m
LEFT JOIN fifo_order o ON m.grp IS NOT NULL AND o.queue = m.queue AND o.grp = m.grp
  AND o.fseq = m.fseq
LEFT JOIN held h ON m.grp IS NULL AND h.seq = m.seq
LEFT JOIN leases l ON m.grp IS NULL AND h.seq IS NULL
  AND l.lease = (SELECT lease FROM leases WHERE queue = m.queue AND hi >= m.seq ORDER BY hi LIMIT 1)
  AND l.lo <= m.seq
WHERE m.grp IS NULL OR o.seq = m.seq;
