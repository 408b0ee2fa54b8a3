-- ocd_ack (0013_ack.sql) without two of its per-message probes, measured the larger part of
-- an ack of 100 after the deletes themselves:
-- - the held rows of the acked messages are looked for only if the queue has any (one probe
--   of ocd_held_due instead of one per message: held rows are retried and delayed messages,
--   rare beside acks);
-- - a lease is known emptied without reading its run when the acks name every seq of it (a
--   push batch's ackAll, a pull's whole lease); otherwise its run is read as before.
-- Same answers, same locks, same order of writes.
CREATE OR REPLACE FUNCTION ocd_ack(q bigint, acked bigint[], part smallint) RETURNS bigint
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
AS $fn$
DECLARE
  n bigint;
BEGIN
  WITH d AS (
    DELETE FROM ocd_messages m WHERE m.seq = ANY (acked) AND m.queue + 0 = q
    RETURNING m.seq, m.size),
  c AS (
    INSERT INTO ocd_counts AS c (queue, shard, count, bytes)
    SELECT q, part, -count(*), -coalesce(sum(d.size), 0) FROM d HAVING count(*) > 0
    ON CONFLICT (queue, shard) DO UPDATE
    SET count = c.count + excluded.count, bytes = c.bytes + excluded.bytes),
  h AS (
    DELETE FROM ocd_held x WHERE x.seq IN (SELECT d.seq FROM d)
      AND EXISTS (SELECT 1 FROM ocd_held y WHERE y.queue = q)),
  l AS (
    DELETE FROM ocd_leases e WHERE e.lease IN (
      SELECT l.lease FROM ocd_leases l
      WHERE l.queue = q AND l.hi >= (SELECT min(s) FROM unnest(acked) AS s)
        AND l.lo <= (SELECT max(s) FROM unnest(acked) AS s)
        AND CASE
          WHEN (SELECT count(DISTINCT s) FROM unnest(acked) AS s WHERE s BETWEEN l.lo AND l.hi)
               = l.hi - l.lo + 1 THEN true
          ELSE (SELECT m.seq FROM ocd_messages m
                WHERE m.seq BETWEEN l.lo AND l.hi AND m.queue + 0 = q AND m.seq <> ALL (acked)
                  AND NOT EXISTS (SELECT 1 FROM ocd_held x WHERE x.seq = m.seq) LIMIT 1) IS NULL
        END
      FOR UPDATE SKIP LOCKED))
  SELECT count(*) INTO n FROM d;
  PERFORM pg_notify('ocd_q_' || q, '');
  RETURN n;
END
$fn$;
