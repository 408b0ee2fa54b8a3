-- Bulk move tasks (redrives and deletes), so that one survives a restart: its bound
-- and cursor as (send time, seq), its progress, and the node running it.
CREATE TABLE move_tasks (
    task_id        TEXT    PRIMARY KEY,
    account        TEXT    NOT NULL,
    source_id      TEXT    NOT NULL,
    source         TEXT    NOT NULL,
    destination_id TEXT,
    destination    TEXT,
    total          INTEGER NOT NULL,
    started_ms     INTEGER NOT NULL,
    done           INTEGER NOT NULL DEFAULT 0,
    state          TEXT    NOT NULL,
    error          TEXT,
    finished_ms    INTEGER,
    rate           INTEGER,
    bound_sent     INTEGER,
    bound_seq      INTEGER,
    cursor_sent    INTEGER,
    cursor_seq     INTEGER,
    spec           TEXT    NOT NULL,
    node           TEXT    NOT NULL
);
-- one active redrive per source queue
CREATE UNIQUE INDEX move_tasks_active ON move_tasks (source_id)
    WHERE destination_id IS NOT NULL AND state IN ('running', 'cancelling');
