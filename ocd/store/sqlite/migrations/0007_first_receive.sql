-- When a claim first leased each message (SQS's ApproximateFirstReceiveTimestamp).
ALTER TABLE messages ADD COLUMN first_received_ms INTEGER;
