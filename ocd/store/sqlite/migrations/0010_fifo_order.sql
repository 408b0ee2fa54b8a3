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

INSERT INTO fifo_order (queue, grp, fseq, seq, visible_ms, attempts, first_received_ms, lease,
                        lease_kind)
SELECT queue, grp, fseq, seq, visible_ms, attempts, first_received_ms, lease, lease_kind
FROM messages WHERE grp IS NOT NULL;

-- The group index and the visibility index lived on messages only for FIFO rows.
DROP INDEX messages_group;
DROP INDEX messages_visible;

-- Each message as readers see it (browse, search, export): a held message waits until its
-- time, a message of a live lease is in flight with that attempt counted, a FIFO message
-- as its fifo_order row says.
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
  AND l.lo <= m.seq;
