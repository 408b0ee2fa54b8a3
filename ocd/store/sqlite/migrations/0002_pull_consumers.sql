-- HTTP pull consumers; worker consumers live in the config file.
CREATE TABLE consumers (
    key          INTEGER PRIMARY KEY,
    queue        INTEGER NOT NULL UNIQUE,
    consumer_id  TEXT    NOT NULL UNIQUE,
    created_ms   INTEGER NOT NULL,
    dead_letter_queue TEXT,
    settings     TEXT    NOT NULL
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
ALTER TABLE queues ADD COLUMN purged_ms INTEGER;
