-- A queue table turns over fast: keep its statistics and its dead rows up with it.
ALTER TABLE ocd_messages SET (autovacuum_vacuum_scale_factor = 0.02,
                              autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE ocd_counts SET (autovacuum_vacuum_scale_factor = 0,
                            autovacuum_vacuum_threshold = 1000);
