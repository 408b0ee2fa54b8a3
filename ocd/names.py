"""The queue name rule, one place for the config, the REST API and the CLI.

Cloudflare accepts lowercase letters, digits and dashes, starting and ending with a letter
or digit, at most 63 characters (``My_Queue`` and ``ends-with-dash-`` are refused). ocd
also accepts a ``.fifo`` suffix, which names a FIFO queue.
"""

from __future__ import annotations

import re

QUEUE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.fifo)?")
QUEUE_NAME_RULE = (
    "1..63 lowercase letters, digits and '-', starting and ending with a letter or digit, "
    "optionally ending in '.fifo'"
)


def is_queue_name(value: str) -> bool:
    return QUEUE_NAME.fullmatch(value) is not None
