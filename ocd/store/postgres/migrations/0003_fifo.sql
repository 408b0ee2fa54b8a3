-- FIFO queues (names ending in .fifo): settings, the last sequence number given, and per
-- message its group, deduplication id and sequence number.
ALTER TABLE ocd_queues ADD COLUMN content_dedup boolean NOT NULL DEFAULT false,
                       ADD COLUMN dedup_scope text NOT NULL DEFAULT 'queue',
                       ADD COLUMN fifo_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE ocd_messages ADD COLUMN grp text, ADD COLUMN dedup text, ADD COLUMN fseq bigint;
CREATE INDEX ocd_messages_group ON ocd_messages (queue, grp, fseq) WHERE grp IS NOT NULL;
-- One row per FIFO group with messages: ready_ms is when its head (lowest fseq) is
-- visible, so the ready groups are a range of one index however deep any group is.
CREATE TABLE ocd_groups (
    queue    bigint NOT NULL REFERENCES ocd_queues (key) ON DELETE CASCADE,
    grp      text   NOT NULL,
    ready_ms bigint NOT NULL,
    PRIMARY KEY (queue, grp)
);
CREATE INDEX ocd_groups_ready ON ocd_groups (queue, ready_ms);
-- Deduplication ids seen in the last five minutes (scope: '' or the group).
CREATE TABLE ocd_dedup (
    queue      bigint NOT NULL REFERENCES ocd_queues (key) ON DELETE CASCADE,
    scope      text   NOT NULL,
    dedup      text   NOT NULL,
    expires_ms bigint NOT NULL,
    message_id text   NOT NULL,
    fseq       bigint NOT NULL,
    PRIMARY KEY (queue, scope, dedup)
);
-- Ids are written in send order, so their expiry follows the table's physical order:
-- a BRIN index finds the lapsed ones for pruning at a fraction of a btree's cost per send.
CREATE INDEX ocd_dedup_expires ON ocd_dedup USING brin (expires_ms)
  WITH (autosummarize = on);
-- Claim the ready heads and the ready runs behind them, longest-waiting group first, in
-- one round trip: a loop that stops as soon as the batch is full, as SQLite's does.
CREATE FUNCTION ocd_fifo_claim(q bigint, now_ms bigint, n integer, until_ms bigint,
                               lease_id bigint, kind smallint, node text)
RETURNS TABLE (seq bigint, id text, content_type text, body bytea, sent_ms bigint,
               attempts integer, grp text, fseq bigint, dedup text, ord bigint)
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
              x.dedup, p.o;
END
$fn$;
-- Make the rows of some groups true again: the head's visibility, or gone if empty.
CREATE FUNCTION ocd_fifo_refresh(q bigint, groups text[]) RETURNS void
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  g text;
  head bigint;
BEGIN
  FOREACH g IN ARRAY groups LOOP
    SELECT x.visible_ms INTO head FROM ocd_messages x
    WHERE x.queue = q AND x.grp = g ORDER BY x.fseq LIMIT 1;
    IF NOT FOUND THEN
      DELETE FROM ocd_groups o WHERE o.queue = q AND o.grp = g;
    ELSE
      INSERT INTO ocd_groups AS o (queue, grp, ready_ms) VALUES (q, g, head)
      ON CONFLICT (queue, grp) DO UPDATE SET ready_ms = excluded.ready_ms;
    END IF;
  END LOOP;
END
$fn$;
-- An ack-only settle of a FIFO queue in one round trip: under the queue's FIFO lock,
-- delete, count, refresh the groups, and wake the queue's consumers.
CREATE FUNCTION ocd_fifo_ack(q bigint, seqs bigint[], shard smallint) RETURNS bigint
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  groups text[];
  n bigint;
  b bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(1868784675, q::integer);  -- FIFO_LOCK
  WITH d AS (
    DELETE FROM ocd_messages x WHERE x.seq = ANY (seqs) AND x.queue + 0 = q
    RETURNING x.size, x.grp)
  SELECT count(*), coalesce(sum(d.size), 0),
         array_agg(DISTINCT d.grp) FILTER (WHERE d.grp IS NOT NULL)
  INTO n, b, groups FROM d;
  IF n > 0 THEN
    INSERT INTO ocd_counts AS c (queue, shard, count, bytes) VALUES (q, shard, -n, -b)
    ON CONFLICT (queue, shard) DO UPDATE
    SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes;
  END IF;
  IF groups IS NOT NULL THEN
    PERFORM ocd_fifo_refresh(q, groups);
  END IF;
  PERFORM pg_notify('ocd_q_' || q, '');
  RETURN n;
END
$fn$;
-- The messages of a lease right behind one of its group (a claim leases a consecutive
-- run and only acks delete inside it): stops at the first message of another lease.
CREATE FUNCTION ocd_fifo_behind(q bigint, g text, after bigint, lease_id bigint)
RETURNS SETOF bigint LANGUAGE plpgsql AS $fn$
DECLARE
  m record;
BEGIN
  FOR m IN SELECT x.seq, x.lease FROM ocd_messages x
           WHERE x.queue = q AND x.grp = g AND x.fseq > after ORDER BY x.fseq LIMIT 1000 LOOP
    EXIT WHEN m.lease IS DISTINCT FROM lease_id;
    RETURN NEXT m.seq;
  END LOOP;
END
$fn$;
