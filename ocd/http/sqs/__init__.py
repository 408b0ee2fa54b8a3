"""The SQS-compatible endpoint: AWS JSON 1.0 over its own listener (``[sqs]``).

``app`` parses requests and writes replies, ``errors`` holds SQS's error codes, ``md5``
the checksums SDKs verify, ``queues`` the parsing of SQS queue attributes and
``attributes`` their mapping onto ocd's settings, ``context`` what every action works
with, ``queue_actions`` and ``message_actions`` the operations, and ``actions`` the one
table of action names. It never imports the Cloudflare surface (``ocd.http.cloudflare``)
and writes no SQL: it calls ``ocd.producer``, ``ocd.pull``, ``ocd.admin`` and store reads.
"""
