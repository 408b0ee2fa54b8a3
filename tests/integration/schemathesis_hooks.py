"""Schemathesis hooks for test_api_schemathesis.py, loaded by ``st run`` in its own process
(``hooks`` in the generated schemathesis.toml).

They keep the fuzz bounded and count what it sent: a valid ``wait_ms`` would hold a pull on
an empty queue up to 20 s, so it is sent as 0 (its parsing is still fuzzed: wrong types and
out-of-range values pass through); every response is counted into ``$OCD_FUZZ_COUNT``.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

import schemathesis

_lock = threading.Lock()
_sent = 0


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any) -> None:
    # here rather than in map_body: the coverage phase's cases skip map_body
    body = case.body
    if isinstance(body, dict):
        wait = body.get("wait_ms")
        if isinstance(wait, int | float) and not isinstance(wait, bool) and 0 < wait <= 20_000:
            case.body = {**body, "wait_ms": 0}


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    global _sent
    with _lock:
        _sent += 1


@atexit.register
def _write_count() -> None:
    path = os.environ.get("OCD_FUZZ_COUNT")
    if path:
        with open(path, "w") as f:
            f.write(str(_sent))
