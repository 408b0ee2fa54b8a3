"""The ack/retry precedence rules, as workerd and Cloudflare's docs define them."""

from typing import NamedTuple

import pytest

from ocd.decide import decide, exhausted, send_delay, spend
from ocd.store import Retry
from runtime import BatchMarks


def test_success_acks_unmarked_messages():
    v = decide(["a", "b"], BatchMarks(), handler_ok=True, retry_delay_s=7)
    assert v.acks == ["a", "b"]
    assert v.retries == {}


def test_failure_retries_unmarked_with_consumer_retry_delay():
    v = decide(["a", "b"], BatchMarks(), handler_ok=False, retry_delay_s=7)
    assert v.acks == []
    assert v.retries == {"a": 7, "b": 7}


def test_explicit_ack_survives_a_thrown_handler():
    v = decide(["a", "b"], BatchMarks(acks={"a"}), handler_ok=False, retry_delay_s=0)
    assert v.acks == ["a"]
    assert v.retries == {"b": 0}


def test_message_retry_beats_ack_all_and_success():
    marks = BatchMarks(ack_all=True, retries={"b": 30})
    v = decide(["a", "b"], marks, handler_ok=True, retry_delay_s=0)
    assert v.acks == ["a"]
    assert v.retries == {"b": 30}


def test_ack_all_acks_everything_even_when_handler_fails():
    v = decide(["a", "b"], BatchMarks(ack_all=True), handler_ok=False, retry_delay_s=0)
    assert v.acks == ["a", "b"]


def test_retry_all_retries_on_success_except_explicit_acks():
    marks = BatchMarks(retry_all=True, retry_all_delay=60, acks={"a"})
    v = decide(["a", "b", "c"], marks, handler_ok=True, retry_delay_s=5)
    assert v.acks == ["a"]
    assert v.retries == {"b": 60, "c": 60}


@pytest.mark.parametrize(
    ("msg_delay", "batch_delay", "consumer", "expected"),
    [
        (10, 20, 30, 10),
        (None, 20, 30, 20),
        (None, None, 30, 30),
        (None, None, 0, 0),
        (0, 20, 30, 0),
    ],
)
def test_retry_delay_precedence(msg_delay, batch_delay, consumer, expected):
    marks = BatchMarks(retries={"a": msg_delay})
    if batch_delay is not None:
        marks.retry_all = True
        marks.retry_all_delay = batch_delay
    v = decide(["a"], marks, handler_ok=True, retry_delay_s=consumer)
    assert v.retries == {"a": expected}


def test_retry_all_without_delay_uses_consumer_retry_delay():
    v = decide(["a"], BatchMarks(retry_all=True), handler_ok=True, retry_delay_s=9)
    assert v.retries == {"a": 9}


def test_attempt_limit_is_max_retries_plus_one():
    assert not exhausted(attempts=3, max_retries=3)
    assert exhausted(attempts=4, max_retries=3)
    assert exhausted(attempts=1, max_retries=0)


@pytest.mark.parametrize(
    ("msg", "batch", "queue", "expected"),
    [(5, 10, 20, 5), (None, 10, 20, 10), (None, None, 20, 20), (0, 10, 20, 0), (None, 0, 20, 0)],
)
def test_send_delay_precedence_and_explicit_zero(msg, batch, queue, expected):
    assert send_delay(msg, batch, queue) == expected


def test_spend_brings_retries_back_at_their_delay_until_the_last_attempt():
    class M(NamedTuple):
        seq: int
        attempts: int

    fresh, last, past = M(1, 1), M(2, 3), M(3, 5)
    spent = spend([(fresh, 0), (last, 30), (past, 5)], max_retries=2, now_ms=1_000)
    assert spent.retries == [Retry(1, 1_000)]
    assert spent.dead == [last, past]  # the third delivery was the last of max_retries=2
    assert spend([(last, 30)], max_retries=3, now_ms=1_000).retries == [Retry(2, 31_000)]
