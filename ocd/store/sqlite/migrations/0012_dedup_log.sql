-- Deduplication ids in send order: a FIFO send appends its ids to the end of fifo_dedup (a
-- rowid table) and adds each to two narrow indexes, its key (queue, scope, id) and its
-- window's end. Kept in key order (WITHOUT ROWID), every id's whole row (its message id
-- included) landed at its key's place, and its window's index entry carried the key again:
-- ids that do not sort in send order (content hashes, random ids) wrote a page for nearly
-- every id. Rows carry over in the order their windows close.
CREATE TABLE fifo_dedup_log (
    id         INTEGER PRIMARY KEY,
    queue      INTEGER NOT NULL,
    scope      TEXT    NOT NULL,
    dedup      TEXT    NOT NULL,
    expires_ms INTEGER NOT NULL,
    message_id TEXT    NOT NULL,
    fseq       INTEGER NOT NULL
);
INSERT INTO fifo_dedup_log (queue, scope, dedup, expires_ms, message_id, fseq)
SELECT queue, scope, dedup, expires_ms, message_id, fseq FROM fifo_dedup ORDER BY expires_ms;
DROP TABLE fifo_dedup;
ALTER TABLE fifo_dedup_log RENAME TO fifo_dedup;
CREATE UNIQUE INDEX fifo_dedup_key ON fifo_dedup (queue, scope, dedup);
CREATE INDEX fifo_dedup_expires ON fifo_dedup (expires_ms);
