CREATE TABLE queues (
    key          INTEGER PRIMARY KEY,
    account      TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    queue_id     TEXT    NOT NULL UNIQUE,
    created_ms   INTEGER NOT NULL,
    modified_ms  INTEGER NOT NULL,
    delivery_delay_s INTEGER NOT NULL,
    retention_s  INTEGER NOT NULL,
    paused       INTEGER NOT NULL,
    UNIQUE (account, name)
);
CREATE TABLE messages (
    -- AUTOINCREMENT: a seq is never reused, so a stale lease can never name another message
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    queue        INTEGER NOT NULL,
    id           TEXT    NOT NULL,
    content_type TEXT    NOT NULL,
    body         BLOB    NOT NULL,
    size         INTEGER NOT NULL,
    sent_ms      INTEGER NOT NULL,
    visible_ms   INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    lease        INTEGER,
    lease_kind   INTEGER
);
-- ready messages of a queue, oldest-visible first: claims and wake-up times
CREATE INDEX messages_visible ON messages (queue, visible_ms);
-- oldest message of a queue and retention sweeps
CREATE INDEX messages_sent ON messages (queue, sent_ms);
