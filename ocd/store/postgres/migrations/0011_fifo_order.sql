-- FIFO queues written once (docs/architecture.md, "the store as a log"): a FIFO message's
-- row in ocd_messages is never updated by a claim, a retry or a hand-back; what changes
-- about it (when it is visible, its attempts, its first receive, its lease and owner) is its
-- row in ocd_fifo_order, keyed (queue, grp, fseq), with no index on what changes, so those
-- updates are HOT: no index entry a claim, where a claim used to write five a message.
-- A send (and migrate-store's copy) inserts the order rows with the messages; a trigger
-- drops a FIFO row's order row with it, whichever statement deletes it (acks, retention,
-- purges, dead letters, a queue's deletion).
CREATE TABLE ocd_fifo_order (
    queue             bigint   NOT NULL,
    grp               text     NOT NULL,
    fseq              bigint   NOT NULL,
    seq               bigint   NOT NULL,
    visible_ms        bigint   NOT NULL,
    attempts          integer  NOT NULL,
    first_received_ms bigint,
    lease             bigint,
    lease_kind        smallint,
    owner             text,
    PRIMARY KEY (queue, grp, fseq)
) WITH (fillfactor = 70);
ALTER TABLE ocd_fifo_order SET (autovacuum_vacuum_scale_factor = 0.02,
                                autovacuum_analyze_scale_factor = 0.02);

INSERT INTO ocd_fifo_order
SELECT queue, grp, fseq, seq, visible_ms, attempts, first_received_ms, lease, lease_kind, owner
FROM ocd_messages WHERE grp IS NOT NULL;
UPDATE ocd_messages SET lease = NULL, lease_kind = NULL, owner = NULL
WHERE grp IS NOT NULL AND lease IS NOT NULL;

CREATE FUNCTION ocd_fifo_order_drop() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  DELETE FROM ocd_fifo_order
  WHERE queue = OLD.queue AND grp = OLD.grp AND fseq = OLD.fseq AND seq = OLD.seq;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER ocd_fifo_order_drop AFTER DELETE ON ocd_messages
FOR EACH ROW WHEN (OLD.grp IS NOT NULL) EXECUTE FUNCTION ocd_fifo_order_drop();

-- The group index, the visibility index and the owner index lived on ocd_messages for FIFO
-- rows only (standard queues' leases are ocd_leases rows). An owner's FIFO leases are
-- found by walking the order rows: only when a node stops or is reaped.
DROP INDEX ocd_messages_group;
DROP INDEX ocd_messages_visible;
DROP INDEX ocd_messages_owner;

CREATE OR REPLACE FUNCTION ocd_fifo_refresh(q bigint, groups text[]) RETURNS void
LANGUAGE sql AS $fn$
  WITH h AS (
    SELECT g.grp, (SELECT x.visible_ms FROM ocd_fifo_order x
                   WHERE x.queue = q AND x.grp = g.grp ORDER BY x.fseq LIMIT 1) AS head
    FROM (SELECT DISTINCT unnest(groups) AS grp) AS g),
  gone AS (
    DELETE FROM ocd_groups o USING h
    WHERE o.queue = q AND o.grp = h.grp AND h.head IS NULL)
  INSERT INTO ocd_groups AS o (queue, grp, ready_ms)
  SELECT q, h.grp, h.head FROM h WHERE h.head IS NOT NULL
  ON CONFLICT (queue, grp) DO UPDATE SET ready_ms = excluded.ready_ms;
$fn$;

CREATE OR REPLACE FUNCTION ocd_fifo_claim(q bigint, now_ms bigint, n integer, until_ms bigint,
                                          lease_id bigint, kind smallint, node text)
RETURNS TABLE (seq bigint, id text, content_type text, body bytea, sent_ms bigint,
               attempts integer, grp text, fseq bigint, dedup text, attrs bytea,
               first_received_ms bigint, ord bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  gs text[];
  r record;
  pg text[] := '{}';
  pf bigint[] := '{}';
  taken text[] := '{}';
  stale text[] := '{}';
  rg text[];
  rf bigint[];
  k integer := 0;
  pos integer := 1;
  cnt integer;
  j integer;
  take integer;
BEGIN
  PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK, for the transaction
  SELECT array_agg(o.grp ORDER BY o.ready_ms) INTO gs FROM (
    SELECT o.grp, o.ready_ms FROM ocd_groups o
    WHERE o.queue = q AND o.ready_ms <= now_ms ORDER BY o.ready_ms LIMIT n) AS o;
  WHILE gs IS NOT NULL AND pos <= cardinality(gs) AND k < n LOOP
    IF pos = 1 THEN
      cnt := 1;  -- the first group alone: its run says how deep the groups are
    ELSE
      cnt := least(cardinality(gs) - pos + 1,
                   greatest(1, ceil((n - k)::numeric / greatest(1, k / (pos - 1)))::integer));
    END IF;
    -- each asked group's next messages, in order (none: its row is stale)
    FOR r IN SELECT a.g, array_agg(x.fseq ORDER BY x.fseq) AS fseqs,
                    array_agg(x.visible_ms ORDER BY x.fseq) AS vis
             FROM unnest(gs[pos:pos + cnt - 1]) WITH ORDINALITY AS a (g, i)
             LEFT JOIN LATERAL (
               SELECT y.fseq, y.visible_ms FROM ocd_fifo_order y
               WHERE y.queue = q AND y.grp = a.g ORDER BY y.fseq LIMIT n - k) AS x ON true
             GROUP BY a.i, a.g ORDER BY a.i LOOP
      j := 1;
      WHILE r.fseqs[j] IS NOT NULL AND r.vis[j] <= now_ms LOOP
        j := j + 1;
      END LOOP;
      IF j = 1 THEN
        stale := stale || r.g;
      ELSIF k < n THEN
        take := least(j - 1, n - k);
        pf := pf || r.fseqs[1:take];
        pg := pg || array_fill(r.g, ARRAY[take]);
        k := k + take;
        taken := taken || r.g;
      END IF;
    END LOOP;
    pos := pos + cnt;
  END LOOP;
  IF cardinality(stale) > 0 THEN PERFORM ocd_fifo_refresh(q, stale); END IF;
  UPDATE ocd_groups o SET ready_ms = until_ms WHERE o.queue = q AND o.grp = ANY (taken);
  RETURN QUERY
    WITH u AS (
      UPDATE ocd_fifo_order x
      SET attempts = x.attempts + 1, visible_ms = until_ms, lease = lease_id,
          lease_kind = kind, owner = node,
          first_received_ms = coalesce(x.first_received_ms, now_ms)
      FROM unnest(pg, pf) WITH ORDINALITY AS p (g, f, o)
      WHERE x.queue = q AND x.grp = p.g AND x.fseq = p.f
      RETURNING x.seq, x.attempts, x.first_received_ms, p.o)
    SELECT m.seq, m.id, m.content_type, m.body, m.sent_ms, u.attempts, m.grp, m.fseq,
           m.dedup, m.attrs, u.first_received_ms, u.o
    FROM u JOIN ocd_messages m ON m.seq = u.seq;
END
$fn$;

CREATE OR REPLACE FUNCTION ocd_fifo_behind(q bigint, g text, after bigint, lease_id bigint)
RETURNS SETOF bigint LANGUAGE plpgsql AS $fn$
DECLARE
  m record;
BEGIN
  FOR m IN SELECT x.seq, x.lease FROM ocd_fifo_order x
           WHERE x.queue = q AND x.grp = g AND x.fseq > after ORDER BY x.fseq LIMIT 1000 LOOP
    EXIT WHEN m.lease IS DISTINCT FROM lease_id;
    RETURN NEXT m.seq;
  END LOOP;
END
$fn$;

-- Each message as readers see it: a FIFO message as its order row says.
CREATE OR REPLACE VIEW ocd_message_states AS
SELECT m.seq, m.queue, m.id, m.content_type, m.body, m.size, m.sent_ms, m.grp, m.dedup,
       m.fseq, m.attrs,
       coalesce(o.visible_ms, h.until_ms, l.deadline_ms, m.visible_ms) AS visible_ms,
       CASE WHEN o.seq IS NOT NULL THEN o.attempts
            WHEN h.seq IS NOT NULL THEN h.attempts
            WHEN l.lease IS NOT NULL THEN m.attempts + 1
            ELSE m.attempts END AS attempts,
       CASE WHEN o.seq IS NOT NULL THEN o.lease ELSE coalesce(m.lease, l.lease) END AS lease,
       CASE WHEN o.seq IS NOT NULL THEN o.first_received_ms
            WHEN h.seq IS NOT NULL THEN h.first_received_ms
            WHEN l.lease IS NOT NULL THEN coalesce(m.first_received_ms, l.claimed_ms)
            ELSE m.first_received_ms END AS first_received_ms
FROM ocd_messages m
LEFT JOIN ocd_fifo_order o ON m.grp IS NOT NULL AND o.queue = m.queue AND o.grp = m.grp
  AND o.fseq = m.fseq
LEFT JOIN ocd_held h ON h.seq = m.seq
LEFT JOIN LATERAL (
  SELECT x.lease, x.lo, x.claimed_ms, x.deadline_ms FROM ocd_leases x
  WHERE x.queue = m.queue AND x.hi >= m.seq AND m.grp IS NULL AND h.seq IS NULL
  ORDER BY x.hi LIMIT 1) AS l ON l.lo <= m.seq;
