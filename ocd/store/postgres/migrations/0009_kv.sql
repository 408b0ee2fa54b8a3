-- KV namespaces: values by (account, namespace, key). Keys in the "C" collation: UTF-8 byte
-- order, the order a listing returns them in, whatever the database's locale.
CREATE TABLE ocd_kv (
    account    text   NOT NULL,
    namespace  text   NOT NULL,
    key        text   COLLATE "C" NOT NULL,
    value      bytea  NOT NULL,
    expires_ms bigint,
    metadata   text,
    PRIMARY KEY (account, namespace, key)
);
-- the retention sweep finds expired keys without a scan
CREATE INDEX ocd_kv_expiry ON ocd_kv (expires_ms) WHERE expires_ms IS NOT NULL;
