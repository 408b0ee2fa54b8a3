-- FIFO claims and group refreshes that cost a few statements, not one per group.
-- A claim reads the ready groups, the first group's run, then the runs of as many of the
-- next groups as the runs so far say will fill the batch, in one statement (and again if
-- they fell short); what is read beyond the batch is left alone, so the batch is the one
-- a loop over the groups would take. A refresh of many groups is one statement.
CREATE OR REPLACE FUNCTION ocd_fifo_refresh(q bigint, groups text[]) RETURNS void
LANGUAGE sql AS $fn$
  WITH h AS (
    SELECT g.grp, (SELECT x.visible_ms FROM ocd_messages x
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
  picked bigint[] := '{}';
  taken text[] := '{}';
  stale text[] := '{}';
  run bigint[];
  k integer := 0;
  pos integer := 1;
  cnt integer;
  j integer;
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
    FOR r IN SELECT a.g, array_agg(x.seq ORDER BY x.fseq) AS seqs,
                    array_agg(x.visible_ms ORDER BY x.fseq) AS vis
             FROM unnest(gs[pos:pos + cnt - 1]) WITH ORDINALITY AS a (g, i)
             LEFT JOIN LATERAL (
               SELECT y.seq, y.visible_ms, y.fseq FROM ocd_messages y
               WHERE y.queue = q AND y.grp = a.g ORDER BY y.fseq LIMIT n - k) AS x ON true
             GROUP BY a.i, a.g ORDER BY a.i LOOP
      run := '{}';
      j := 1;
      WHILE r.seqs[j] IS NOT NULL AND r.vis[j] <= now_ms LOOP
        run := run || r.seqs[j];
        j := j + 1;
      END LOOP;
      IF cardinality(run) = 0 THEN
        stale := stale || r.g;
      ELSIF k < n THEN
        picked := picked || run[1:n - k];
        k := k + least(cardinality(run), n - k);
        taken := taken || r.g;
      END IF;
    END LOOP;
    pos := pos + cnt;
  END LOOP;
  IF cardinality(stale) > 0 THEN PERFORM ocd_fifo_refresh(q, stale); END IF;
  UPDATE ocd_groups o SET ready_ms = until_ms WHERE o.queue = q AND o.grp = ANY (taken);
  RETURN QUERY
    UPDATE ocd_messages x
    SET attempts = x.attempts + 1, visible_ms = until_ms, lease = lease_id,
        lease_kind = kind, owner = node,
        first_received_ms = coalesce(x.first_received_ms, now_ms)
    FROM unnest(picked) WITH ORDINALITY AS p (s, o)
    WHERE x.seq = p.s AND x.queue + 0 = q
    RETURNING x.seq, x.id, x.content_type, x.body, x.sent_ms, x.attempts, x.grp, x.fseq,
              x.dedup, x.attrs, x.first_received_ms, p.o;
END
$fn$;
