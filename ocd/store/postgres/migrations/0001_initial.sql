CREATE TABLE ocd_nodes (
    node_id      text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ocd_queues (
    key              bigserial PRIMARY KEY,
    account          text    NOT NULL,
    name             text    NOT NULL,
    queue_id         text    NOT NULL UNIQUE,
    created_ms       bigint  NOT NULL,
    modified_ms      bigint  NOT NULL,
    delivery_delay_s integer NOT NULL,
    retention_s      integer NOT NULL,
    paused           boolean NOT NULL,
    purged_ms        bigint,
    UNIQUE (account, name)
);
CREATE TABLE ocd_messages (
    -- a sequence: a seq is never reused, so a stale lease can never name another message
    seq          bigserial PRIMARY KEY,
    queue        bigint  NOT NULL REFERENCES ocd_queues (key) ON DELETE CASCADE,
    id           text    NOT NULL,
    content_type text    NOT NULL,
    body         bytea   NOT NULL,
    size         integer NOT NULL,
    sent_ms      bigint  NOT NULL,
    visible_ms   bigint  NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    lease        bigint,
    lease_kind   smallint,
    owner        text    -- the node holding a PUSH lease
);
CREATE INDEX ocd_messages_visible ON ocd_messages (queue, visible_ms);
CREATE INDEX ocd_messages_sent ON ocd_messages (queue, sent_ms);
CREATE INDEX ocd_messages_owner ON ocd_messages (owner) WHERE owner IS NOT NULL;
-- Backlog counts, kept in the transactions that change them; several rows a queue
-- (shards) so that concurrent transactions rarely wait on one row.
CREATE TABLE ocd_counts (
    queue  bigint   NOT NULL REFERENCES ocd_queues (key) ON DELETE CASCADE,
    shard  smallint NOT NULL,
    count  bigint   NOT NULL,
    bytes  bigint   NOT NULL,
    PRIMARY KEY (queue, shard)
);
CREATE TABLE ocd_consumers (
    key               bigserial PRIMARY KEY,
    queue             bigint NOT NULL UNIQUE REFERENCES ocd_queues (key) ON DELETE CASCADE,
    consumer_id       text   NOT NULL UNIQUE,
    created_ms        bigint NOT NULL,
    dead_letter_queue text,
    settings          text   NOT NULL
);
CREATE TABLE ocd_meta (key text PRIMARY KEY, value bytea NOT NULL);
