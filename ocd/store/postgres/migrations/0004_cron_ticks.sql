-- Cron triggers: the last tick of each schedule claimed to run, and by which node.
CREATE TABLE ocd_cron_ticks (
    schedule text   PRIMARY KEY,
    due_ms   bigint NOT NULL,
    node     text   NOT NULL
);
