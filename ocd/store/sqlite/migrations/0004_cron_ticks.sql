-- Cron triggers: the last tick of each schedule claimed to run, and by which node.
CREATE TABLE cron_ticks (
    schedule TEXT    PRIMARY KEY,
    due_ms   INTEGER NOT NULL,
    node     TEXT    NOT NULL
);
