-- Standard queues as a log (docs/architecture.md, "the store as a log"): a message row is
-- written once and deleted once. A queue's messages are numbered in its own range of seq,
-- queue << 40: the ready band (bit 39 clear) in delivery order, read from the queue's cursor
-- on; the delayed band (bit 39 set) for messages that wait. A claim takes a run of the
-- ready band and writes one lease row; a retry, a delay that ends and a lease that lapses
-- append the message anew and delete the old row. FIFO queues keep their own columns
-- (lease, visible_ms, fseq) and the group index; their new rows are numbered in their
-- queue's range too, so that seqs never collide.
CREATE TABLE cursors (
    queue INTEGER PRIMARY KEY,
    next  INTEGER NOT NULL,  -- the first seq of the ready band not yet claimed
    tail  INTEGER NOT NULL,  -- numbers given in the ready band (never reused)
    dtail INTEGER NOT NULL   -- numbers given in the delayed band
);
-- One row per claimed batch: its run of the ready band [lo, hi], its deadline, its owner kind
-- and when it was claimed (the first receive time of messages claimed for the first time).
CREATE TABLE leases (
    lease       INTEGER PRIMARY KEY,
    queue       INTEGER NOT NULL,
    lo          INTEGER NOT NULL,
    hi          INTEGER NOT NULL,
    kind        INTEGER NOT NULL,
    claimed_ms  INTEGER NOT NULL,
    deadline_ms INTEGER NOT NULL
);
CREATE INDEX leases_run ON leases (queue, hi);
CREATE INDEX leases_deadline ON leases (queue, deadline_ms);
-- Messages that wait outside the ready band: delayed sends, retries with a delay, leases
-- made longer for one message (SQS ChangeMessageVisibility). Due, they are appended to the
-- ready band with these attempts and first receive time.
CREATE TABLE held (
    seq               INTEGER PRIMARY KEY,
    queue             INTEGER NOT NULL,
    until_ms          INTEGER NOT NULL,
    attempts          INTEGER NOT NULL,
    first_received_ms INTEGER
);
CREATE INDEX held_due ON held (queue, until_ms);

-- The messages of standard queues into the log. Waiting ones and those a push consumer held
-- (made ready again, their spent attempts kept: at-least-once allows the redelivery) into
-- the ready band, in the order they became visible; delayed and retrying ones into the
-- delayed band, held until they are due. Those under a pull lease keep their seq, so the
-- lease ids their consumers hold still ack them, held until the lease's deadline.
INSERT INTO held (seq, queue, until_ms, attempts, first_received_ms)
SELECT seq, queue, visible_ms, attempts, first_received_ms FROM messages
WHERE grp IS NULL AND lease_kind = 2;
CREATE TEMP TABLE relog AS
SELECT seq AS old, queue,
       (lease IS NULL AND visible_ms > sent_ms) AS band,
       row_number() OVER (PARTITION BY queue, (lease IS NULL AND visible_ms > sent_ms)
                          ORDER BY visible_ms, seq) - 1 AS n
FROM messages WHERE grp IS NULL AND lease_kind IS NOT 2;
INSERT INTO held (seq, queue, until_ms, attempts, first_received_ms)
SELECT (r.queue << 40) | (1 << 39) | r.n, r.queue, m.visible_ms, m.attempts, m.first_received_ms
FROM relog r JOIN messages m ON m.seq = r.old WHERE r.band = 1;
UPDATE messages
SET seq = (SELECT (r.queue << 40) | (r.band << 39) | r.n FROM relog r WHERE r.old = messages.seq)
WHERE grp IS NULL AND lease_kind IS NOT 2;
UPDATE messages SET lease = NULL, lease_kind = NULL WHERE grp IS NULL;
INSERT INTO cursors (queue, next, tail, dtail)
SELECT q.key, q.key << 40,
       (SELECT count(*) FROM relog r WHERE r.queue = q.key AND r.band = 0),
       (SELECT count(*) FROM relog r WHERE r.queue = q.key AND r.band = 1)
FROM queues q;
DROP TABLE relog;

-- Only FIFO messages still change visibility in place.
DROP INDEX messages_visible;
CREATE INDEX messages_visible ON messages (queue, visible_ms) WHERE grp IS NOT NULL;

-- Each message as readers see it (browse, search, export): a held message waits until its
-- time, a message of a live lease is in flight with that attempt counted, a FIFO message
-- says so in its own columns.
CREATE VIEW message_states AS
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
FROM messages m
LEFT JOIN held h ON h.seq = m.seq
LEFT JOIN leases l ON m.grp IS NULL AND h.seq IS NULL
  AND l.lease = (SELECT lease FROM leases WHERE queue = m.queue AND hi >= m.seq ORDER BY hi LIMIT 1)
  AND l.lo <= m.seq;
