-- What the SQS endpoint keeps and ocd's settings do not: per message its attributes
-- (an opaque blob), per queue its tags and its unmapped SQS attributes (JSON objects).
ALTER TABLE ocd_messages ADD COLUMN attrs bytea;
ALTER TABLE ocd_queues ADD COLUMN sqs_attrs text, ADD COLUMN tags text;
-- The FIFO claim returns the attributes too (a new result type: dropped and made again).
DROP FUNCTION ocd_fifo_claim(bigint, bigint, integer, bigint, bigint, smallint, text);
CREATE FUNCTION ocd_fifo_claim(q bigint, now_ms bigint, n integer, until_ms bigint,
                               lease_id bigint, kind smallint, node text)
RETURNS TABLE (seq bigint, id text, content_type text, body bytea, sent_ms bigint,
               attempts integer, grp text, fseq bigint, dedup text, attrs bytea,
               ord bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  g record;
  m record;
  picked bigint[] := '{}';
  taken text[] := '{}';
  stale text[] := '{}';
  k integer := 0;
  took boolean;
BEGIN
  PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK, for the transaction
  FOR g IN SELECT o.grp FROM ocd_groups o
           WHERE o.queue = q AND o.ready_ms <= now_ms ORDER BY o.ready_ms LIMIT n LOOP
    took := false;
    FOR m IN SELECT x.seq, x.visible_ms FROM ocd_messages x
             WHERE x.queue = q AND x.grp = g.grp ORDER BY x.fseq LIMIT n - k LOOP
      EXIT WHEN m.visible_ms > now_ms;
      picked := picked || m.seq;
      k := k + 1;
      took := true;
    END LOOP;
    IF took THEN taken := taken || g.grp; ELSE stale := stale || g.grp; END IF;
    EXIT WHEN k >= n;
  END LOOP;
  IF cardinality(stale) > 0 THEN PERFORM ocd_fifo_refresh(q, stale); END IF;
  UPDATE ocd_groups o SET ready_ms = until_ms WHERE o.queue = q AND o.grp = ANY (taken);
  RETURN QUERY
    UPDATE ocd_messages x
    SET attempts = x.attempts + 1, visible_ms = until_ms, lease = lease_id,
        lease_kind = kind, owner = node
    FROM unnest(picked) WITH ORDINALITY AS p (s, o)
    WHERE x.seq = p.s AND x.queue + 0 = q
    RETURNING x.seq, x.id, x.content_type, x.body, x.sent_ms, x.attempts, x.grp, x.fseq,
              x.dedup, x.attrs, p.o;
END
$fn$;
