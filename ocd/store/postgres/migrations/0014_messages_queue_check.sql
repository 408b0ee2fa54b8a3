-- A message row without a foreign key to its queue: its check locked the queue's row once a
-- message sent (an after-row trigger and a query each), about a tenth of the server's CPU
-- a message. Every statement that adds messages to a queue holds a lock that a queue's
-- deletion must wait for, and fails when the queue is gone: standard sends, re-appends and
-- moves take the queue's tail row (ocd_tails keeps its foreign key: a missing tail row is
-- inserted, and checked); FIFO sends and moves lock the queue's row. A queue's deletion
-- deletes the queue's row first, so waits for them, then its messages, held rows, leases
-- and deduplication ids in a statement of their own, which sees what they committed
-- (sql.DELETE_QUEUE, sql.DELETE_QUEUE_ROWS).
ALTER TABLE ocd_messages DROP CONSTRAINT ocd_messages_queue_fkey;
