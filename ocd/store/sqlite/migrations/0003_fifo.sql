-- FIFO queues (names ending in .fifo): settings, the last sequence number given, and per
-- message its group, deduplication id and sequence number.
ALTER TABLE queues ADD COLUMN content_dedup INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN dedup_scope TEXT NOT NULL DEFAULT 'queue';
ALTER TABLE queues ADD COLUMN fifo_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN grp TEXT;
ALTER TABLE messages ADD COLUMN dedup TEXT;
ALTER TABLE messages ADD COLUMN fseq INTEGER;
CREATE INDEX messages_group ON messages (queue, grp, fseq) WHERE grp IS NOT NULL;
-- One row per FIFO group with messages: ready_ms is when its head (lowest fseq) is
-- visible, so the ready groups are a range of one index however deep any group is.
CREATE TABLE fifo_groups (
    queue    INTEGER NOT NULL,
    grp      TEXT    NOT NULL,
    ready_ms INTEGER NOT NULL,
    PRIMARY KEY (queue, grp)
) WITHOUT ROWID;
CREATE INDEX fifo_groups_ready ON fifo_groups (queue, ready_ms);
-- Deduplication ids seen in the last five minutes (scope: '' or the group).
CREATE TABLE fifo_dedup (
    queue      INTEGER NOT NULL,
    scope      TEXT    NOT NULL,
    dedup      TEXT    NOT NULL,
    expires_ms INTEGER NOT NULL,
    message_id TEXT    NOT NULL,
    fseq       INTEGER NOT NULL,
    PRIMARY KEY (queue, scope, dedup)
) WITHOUT ROWID;
CREATE INDEX fifo_dedup_expires ON fifo_dedup (expires_ms);
