-- KV namespaces: values by (account, namespace, key). BINARY collation keeps keys in UTF-8
-- byte order, the order a listing returns them in.
CREATE TABLE kv (
    account    TEXT    NOT NULL,
    namespace  TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    value      BLOB    NOT NULL,
    expires_ms INTEGER,
    metadata   TEXT,
    PRIMARY KEY (account, namespace, key)
);  -- a rowid table: values run to 25 MiB, too big for WITHOUT ROWID's b-tree
-- the retention sweep finds expired keys without a scan
CREATE INDEX kv_expiry ON kv (expires_ms) WHERE expires_ms IS NOT NULL;
