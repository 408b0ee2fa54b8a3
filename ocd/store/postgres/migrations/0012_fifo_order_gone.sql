-- A FIFO message's order row goes with it once a statement, not once a row: the trigger
-- of 0011 ran a plpgsql call and a DELETE for every FIFO message deleted (an ack of 100
-- ran 100 of each); this one sees the statement's deleted rows as a table and deletes
-- their order rows in one join, whichever statement deleted them (acks, retention, purges,
-- dead letters, a queue's deletion).
DROP TRIGGER ocd_fifo_order_drop ON ocd_messages;
DROP FUNCTION ocd_fifo_order_drop();

CREATE FUNCTION ocd_fifo_order_gone() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  qs bigint[];
  gs text[];
  fs bigint[];
BEGIN
  SELECT array_agg(g.queue), array_agg(g.grp), array_agg(g.fseq) INTO qs, gs, fs
  FROM gone g WHERE g.grp IS NOT NULL;
  IF qs IS NOT NULL THEN
    -- by key, one index probe a row: the deleted rows come as a table without statistics,
    -- which a join may plan as a scan of every order row
    DELETE FROM ocd_fifo_order o USING unnest(qs, gs, fs) AS u (q, g, f)
    WHERE o.queue = u.q AND o.grp = u.g AND o.fseq = u.f;
  END IF;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER ocd_fifo_order_gone AFTER DELETE ON ocd_messages
REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ocd_fifo_order_gone();

-- Deduplication ids without a foreign key: its check locked the queue's row once a FIFO
-- message sent. A queue's deletion deletes its ids (sql.DELETE_QUEUE_ROWS).
ALTER TABLE ocd_dedup DROP CONSTRAINT ocd_dedup_queue_fkey;

-- The FIFO functions join a batch's keys (an array: 100 groups or messages) to the order
-- rows and group rows of one queue. Planned for the values of each call, or on statistics
-- that lag a queue's churn, a join could read all of the queue's rows to hash them (a
-- claim read 2,100 buffers for 100 messages in fifo_e2e); by key it reads about 5 a row,
-- however deep the queue. So: probes by key only (bitmaps are off in ocd's sessions).
ALTER FUNCTION ocd_fifo_claim(bigint, bigint, integer, bigint, bigint, smallint, text)
  SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off;
ALTER FUNCTION ocd_fifo_ack(bigint, bigint[], smallint)
  SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off;
ALTER FUNCTION ocd_fifo_refresh(bigint, text[])
  SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off;
ALTER FUNCTION ocd_fifo_order_gone()
  SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off;
