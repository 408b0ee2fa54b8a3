-- Bulk move tasks (redrives and deletes), so that one survives a restart: its bound
-- and cursor as (send time, seq), its progress, and the node running it.
CREATE TABLE ocd_move_tasks (
    task_id        text    PRIMARY KEY,
    account        text    NOT NULL,
    source_id      text    NOT NULL,
    source         text    NOT NULL,
    destination_id text,
    destination    text,
    total          bigint  NOT NULL,
    started_ms     bigint  NOT NULL,
    done           bigint  NOT NULL DEFAULT 0,
    state          text    NOT NULL,
    error          text,
    finished_ms    bigint,
    rate           integer,
    bound_sent     bigint,
    bound_seq      bigint,
    cursor_sent    bigint,
    cursor_seq     bigint,
    spec           text    NOT NULL,
    node           text    NOT NULL
);
-- one active redrive per source queue
CREATE UNIQUE INDEX ocd_move_tasks_active ON ocd_move_tasks (source_id)
    WHERE destination_id IS NOT NULL AND state IN ('running', 'cancelling');
