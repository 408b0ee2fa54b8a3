"""The SQS-compatible endpoint: AWS JSON 1.0 over its own listener (``[sqs]``).

``app`` parses requests and writes replies, ``errors`` holds SQS's error codes, ``md5``
the checksums SDKs verify, ``queues`` the mapping of SQS queue attributes onto ocd's
settings, ``actions`` the operations. It never imports the Cloudflare surface (``ocd.api``)
and writes no SQL: it calls ``ocd.producer``, ``ocd.pull``, ``ocd.admin`` and store reads.
"""
