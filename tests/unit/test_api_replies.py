"""The push reply is formatted by hand for speed; it must say exactly what the envelope says.
Pulled and peeked messages carry a FIFO message's keys, as the OpenAPI document says."""

from __future__ import annotations

import json

import pytest

from ocd.http.cloudflare.envelope import ok
from ocd.http.cloudflare.messages import message_json, metrics_json, sent_reply
from ocd.store import Backlog, Delivery
from tests.openapi_schemas import problems, response_validator


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


STANDARD = Delivery(1, "a" * 32, "text", b"hi", 1_800_000_000_000, 1, 7)
FIFO = STANDARD._replace(group="customer-42", sequence=18, dedup="order-9")
MESSAGES = "/accounts/{account_id}/queues/{queue_id}/messages"


def test_pulled_and_peeked_fifo_messages_carry_group_sequence_and_deduplication_id():
    pulled = message_json(FIFO, "lease_id", "lease")
    assert (pulled["lease_id"], pulled["body"]) == ("lease", "hi")
    assert pulled["message_group_id"] == "customer-42"
    assert pulled["sequence_number"] == 18
    assert pulled["message_deduplication_id"] == "order-9"
    standard = message_json(STANDARD, "ref", "r")
    assert set(standard) == {"id", "body", "attempts", "timestamp_ms", "metadata", "ref"}


def test_fifo_pull_and_peek_replies_match_the_documented_schemas():
    metrics = {"metrics": metrics_json(Backlog(2, 4, 1))}
    for d in (FIFO, STANDARD):
        pull = ok(
            {
                "message_backlog_count": 2,
                "messages": [message_json(d, "lease_id", "lease")],
                "metadata": metrics,
            }
        )
        peek = ok({"messages": [message_json(d, "ref", "r")]})
        for path, reply in ((MESSAGES + "/pull", pull), (MESSAGES + "/peek", peek)):
            assert isinstance(reply.body, bytes)
            validator = response_validator("POST", path, 200)
            assert validator is not None
            assert problems(validator, json.loads(reply.body)) == [], (path, d)
