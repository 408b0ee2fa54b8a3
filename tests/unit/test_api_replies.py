"""The push reply is formatted by hand for speed; it must say exactly what the envelope says."""

from __future__ import annotations

import json

import pytest

from ocd.api.envelope import ok
from ocd.api.messages import metrics_json, sent_reply
from ocd.store import Backlog


@pytest.mark.parametrize(
    "backlog", [Backlog(0, 0, 0), Backlog(1, 7, 1_800_000_000_123), Backlog(10**9, 2**40, 1)]
)
def test_push_reply_is_the_envelope_with_the_backlog(backlog):
    fast = sent_reply(backlog)
    slow = ok({"metadata": {"metrics": metrics_json(backlog)}})
    assert isinstance(fast.body, bytes) and isinstance(slow.body, bytes)
    assert json.loads(fast.body) == json.loads(slow.body)
    assert fast.headers["Content-Type"] == slow.headers["Content-Type"]
    assert fast.status == slow.status == 200
