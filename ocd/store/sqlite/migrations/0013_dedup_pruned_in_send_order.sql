-- Deduplication ids are pruned in the order they were stored (fifo_dedup's rowid), a slice
-- from the front at a time, instead of through an index of their windows' ends: every FIFO
-- send wrote an entry to that index for each id, and every prune deleted it again, about a
-- twenty-fifth of a FIFO message's cost in the store. An id's window is its send's time plus
-- a fixed five minutes, so the rowid order is the order windows close in, but for an id
-- stored again over its expired row (it keeps its place) or a wall clock stepped back; such
-- rows only wait at the front until their own window closes (ocd/store/sqlite/fifo.py).
DROP INDEX fifo_dedup_expires;
