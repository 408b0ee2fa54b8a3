-- What the SQS endpoint keeps and ocd's settings do not: per message its attributes
-- (an opaque blob), per queue its tags and its unmapped SQS attributes (JSON objects).
ALTER TABLE messages ADD COLUMN attrs BLOB;
ALTER TABLE queues ADD COLUMN sqs_attrs TEXT;
ALTER TABLE queues ADD COLUMN tags TEXT;
