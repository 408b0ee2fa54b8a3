"""Message attributes and system attributes over SQS with a real boto3 client: stored with
the message (across a restart), filtered on receive, MD5s as the SDKs compute them."""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp
import botocore.exceptions
import pytest

from ocd.http.sqs.md5 import md5_of_attributes
from tests.helpers import FakeClock, eventually
from tests.integration.sqs import SqsDaemon, start

pytestmark = pytest.mark.timeout(60)

ATTRS = {
    "n": {"DataType": "Number", "StringValue": "42.5"},
    "c.label": {"DataType": "String.custom", "StringValue": "héllo"},
    "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"},
}
TRACE = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc"}}


def _wire(attrs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The attributes as the JSON protocol carries them (binary in base64)."""
    return {
        k: {
            kk: base64.b64encode(vv).decode() if isinstance(vv, bytes) else vv
            for kk, vv in v.items()
        }
        for k, v in attrs.items()
    }


@pytest.fixture
async def session():
    s = aiohttp.ClientSession()
    yield s
    await s.close()


@pytest.fixture
async def sqs(tmp_path, store_section, session):
    d = await start(tmp_path, store_section, session)
    yield d
    await d.daemon.shutdown(timeout_s=1)


async def _receive(s: SqsDaemon, url: str, **kw: Any) -> list[dict[str, Any]]:
    out = await s.call(s.sqs.receive_message, QueueUrl=url, MaxNumberOfMessages=10, **kw)
    return list(out.get("Messages", []))


async def test_attributes_come_back_with_the_md5s_the_sdks_check(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = (await sqs.call(c.create_queue, QueueName="attrs"))["QueueUrl"]
    sent = await sqs.call(
        c.send_message,
        QueueUrl=url,
        MessageBody="hello",
        MessageAttributes=ATTRS,
        MessageSystemAttributes=TRACE,
    )
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(_wire(ATTRS))
    assert sent["MD5OfMessageSystemAttributes"] == md5_of_attributes(TRACE)
    (m,) = await _receive(
        sqs,
        url,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["AWSTraceHeader"],
        VisibilityTimeout=0,
    )
    assert m["MessageAttributes"] == ATTRS
    assert m["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert m["Attributes"] == {"AWSTraceHeader": "Root=1-abc"}
    # a prefix or a name picks some; the MD5 is over the ones returned
    (m,) = await _receive(sqs, url, MessageAttributeNames=["c.*", "n"], VisibilityTimeout=0)
    picked = {k: ATTRS[k] for k in ("c.label", "n")}
    assert m["MessageAttributes"] == picked
    assert m["MD5OfMessageAttributes"] == md5_of_attributes(_wire(picked))
    (m,) = await _receive(sqs, url)
    assert "MessageAttributes" not in m and "MD5OfMessageAttributes" not in m
    assert "Attributes" not in m


async def test_batch_entries_with_bad_attributes_fail_alone(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = (await sqs.call(c.create_queue, QueueName="battrs"))["QueueUrl"]
    too_many = {f"a{i}": {"DataType": "String", "StringValue": "x"} for i in range(11)}
    out = await sqs.call(
        c.send_message_batch,
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "x", "MessageAttributes": ATTRS},
            {"Id": "bad", "MessageBody": "y", "MessageAttributes": too_many},
            {
                "Id": "reserved",
                "MessageBody": "z",
                "MessageAttributes": {"AWS.x": TRACE["AWSTraceHeader"]},
            },
            {
                "Id": "name",
                "MessageBody": "n",
                "MessageAttributes": {"a b": {"DataType": "String", "StringValue": "x"}},
            },
            {
                "Id": "type",
                "MessageBody": "t",
                "MessageAttributes": {"a": {"DataType": "Text", "StringValue": "x"}},
            },
            {
                "Id": "number",
                "MessageBody": "u",
                "MessageAttributes": {"Age": {"DataType": "Number", "StringValue": "Hello"}},
            },
        ],
    )
    (ok,) = out["Successful"]
    assert ok["Id"] == "ok" and ok["MD5OfMessageAttributes"] == md5_of_attributes(_wire(ATTRS))
    assert {f["Id"]: (f["Code"], f["Message"], f["SenderFault"]) for f in out["Failed"]} == {
        k: ("InvalidParameterValue", text, True)
        for k, text in {
            "bad": "Number of message attributes [11] exceeds the allowed maximum [10].",
            "reserved": "You can't use message attribute names beginning with 'AWS.' or "
            "'Amazon.'. These strings are reserved for internal use. Additionally, they cannot "
            "start or end with '.'.",
            "name": "Message (user) attributes name can only contain upper and lower score "
            "characters, digits, periods, hyphens and underscores. ",
            "type": "The type of message (user) attribute 'a' is invalid. You must use only the "
            "following supported type prefixes: Binary, Number, String.",
            "number": "Can't cast the value of message (user) attribute 'Age' to a number.",
        }.items()
    }
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.send_message, QueueUrl=url, MessageBody="x", MessageAttributes=too_many)
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    # attributes count toward the message size
    big = {"big": {"DataType": "String", "StringValue": "v" * 1_048_000}}
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.send_message, QueueUrl=url, MessageBody="x" * 800, MessageAttributes=big)
    assert "shorter than" in e.value.response["Error"]["Message"]


async def test_fifo_messages_keep_their_attributes(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = (
        await sqs.call(
            c.create_queue,
            QueueName="fa.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )
    )["QueueUrl"]
    for i in range(2):
        await sqs.call(
            c.send_message,
            QueueUrl=url,
            MessageBody=f"m{i}",
            MessageGroupId="g",
            MessageAttributes={"i": {"DataType": "Number", "StringValue": str(i)}},
        )
    got = await _receive(sqs, url, MessageAttributeNames=["All"])
    assert [m["MessageAttributes"]["i"]["StringValue"] for m in got] == ["0", "1"]


async def test_attributes_survive_a_restart_and_workers_get_the_body_alone(
    tmp_path, store_section, session
) -> None:
    d = await start(tmp_path, store_section, session)
    try:
        url = (await d.call(d.sqs.create_queue, QueueName="kept"))["QueueUrl"]
        await d.call(d.sqs.send_message, QueueUrl=url, MessageBody="b", MessageAttributes=ATTRS)
        worked = (await d.call(d.sqs.get_queue_url, QueueName="worked"))["QueueUrl"]
        await d.call(
            d.sqs.send_message, QueueUrl=worked, MessageBody="for a worker", MessageAttributes=ATTRS
        )

        def recorded() -> list[dict[str, Any]]:
            if not d.record.exists():
                return []
            return [json.loads(x) for x in d.record.read_text().splitlines() if x]

        (line,) = await eventually(recorded)
        assert (line["type"], line["body"]) == ("str", "for a worker")
    finally:
        await d.daemon.shutdown(timeout_s=1)
    d = await start(tmp_path, store_section, session)
    try:
        (m,) = await _receive(d, url, MessageAttributeNames=["All"])
        assert m["MessageAttributes"] == ATTRS
    finally:
        await d.daemon.shutdown(timeout_s=1)


async def test_attribute_names_select_as_sqs_does_and_never_mix_the_two_kinds(
    sqs: SqsDaemon,
) -> None:
    c = sqs.sqs
    url = (await sqs.call(c.create_queue, QueueName="kinds"))["QueueUrl"]
    mine = {
        **ATTRS,
        "SentTimestamp": {"DataType": "String", "StringValue": "a user attribute"},
        "Custom.one": {"DataType": "String", "StringValue": "1"},
        "Custom.two": {"DataType": "String", "StringValue": "2"},
    }
    await sqs.call(c.send_message, QueueUrl=url, MessageBody="x", MessageAttributes=mine)
    # ".*" is every message attribute, and no system attribute
    (m,) = await _receive(sqs, url, MessageAttributeNames=[".*"], VisibilityTimeout=0)
    assert m["MessageAttributes"] == mine and "Attributes" not in m
    # a prefix picks its family only
    (m,) = await _receive(sqs, url, MessageAttributeNames=["Custom.*"], VisibilityTimeout=0)
    assert set(m["MessageAttributes"]) == {"Custom.one", "Custom.two"}
    # a message attribute named like a system one stays a message attribute ...
    (m,) = await _receive(sqs, url, MessageAttributeNames=["SentTimestamp"], VisibilityTimeout=0)
    assert m["MessageAttributes"] == {"SentTimestamp": mine["SentTimestamp"]}
    assert "Attributes" not in m
    # ... and asking for system attributes, by name or All, never returns message ones
    (m,) = await _receive(sqs, url, MessageSystemAttributeNames=["All"], VisibilityTimeout=0)
    assert "MessageAttributes" not in m
    assert m["Attributes"]["SentTimestamp"].isdigit()  # epoch milliseconds, as a string
    assert "Custom.one" not in m["Attributes"] and "n" not in m["Attributes"]
    (m,) = await _receive(sqs, url, AttributeNames=["SentTimestamp"], VisibilityTimeout=0)
    assert set(m["Attributes"]) == {"SentTimestamp"} and "MessageAttributes" not in m


async def test_first_receive_time_stays_through_receives_and_starts_again_in_a_dlq(
    tmp_path, store_section, session
) -> None:
    clock = FakeClock()
    t0 = clock.now
    s = await start(tmp_path, store_section, session, clock=clock)
    try:
        c = s.sqs
        dlq = (await s.call(c.create_queue, QueueName="first-dlq"))["QueueUrl"]
        arn = "arn:aws:sqs:us-east-1:000000000000:first-dlq"
        policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 2})
        url = (
            await s.call(c.create_queue, QueueName="first", Attributes={"RedrivePolicy": policy})
        )["QueueUrl"]
        await s.call(c.send_message, QueueUrl=url, MessageBody="x")
        clock.advance(5)
        # by name, through the older AttributeNames: epoch milliseconds of this receive
        (m,) = await _receive(s, url, AttributeNames=["ApproximateFirstReceiveTimestamp"])
        assert m["Attributes"] == {"ApproximateFirstReceiveTimestamp": str(t0 + 5000)}
        # a visibility change, then a second receive later, keep the first receive's time
        await s.call(
            c.change_message_visibility,
            QueueUrl=url,
            ReceiptHandle=m["ReceiptHandle"],
            VisibilityTimeout=0,
        )
        clock.advance(7)
        (m,) = await _receive(s, url, MessageSystemAttributeNames=["All"])
        assert m["Attributes"]["ApproximateFirstReceiveTimestamp"] == str(t0 + 5000)
        assert m["Attributes"]["ApproximateReceiveCount"] == "2"
        assert m["Attributes"]["SentTimestamp"] == str(t0)
        assert "MessageAttributes" not in m
        # moved to the dead-letter queue: first received from that queue when received there
        clock.advance(60)
        assert await _receive(s, url) == []
        clock.advance(3)
        (m,) = await _receive(s, dlq, AttributeNames=["All"])
        assert m["Attributes"]["ApproximateFirstReceiveTimestamp"] == str(t0 + 75_000)
        assert m["Attributes"]["ApproximateReceiveCount"] == "1"
    finally:
        await s.daemon.shutdown(timeout_s=1)


async def test_first_receive_time_is_the_first_pull_of_the_cloudflare_api_too(
    tmp_path, store_section, session
) -> None:
    from tests.integration.rest import Rest

    clock = FakeClock()
    t0 = clock.now
    s = await start(tmp_path, store_section, session, clock=clock)
    try:
        url = (await s.call(s.sqs.create_queue, QueueName="surfaces"))["QueueUrl"]
        q = s.daemon.store.queue("surfaces")
        assert q is not None
        await s.call(s.sqs.send_message, QueueUrl=url, MessageBody="x")
        clock.advance(2)
        rest = Rest(s, token=None)  # an SqsDaemon has the session and base URL it uses
        await rest.pull_consumer(q.queue_id)
        pulled = await rest.pull(q.queue_id, visibility_timeout_ms=1000)
        assert len(pulled["messages"]) == 1
        clock.advance(5)
        (m,) = await _receive(
            s, url, MessageSystemAttributeNames=["ApproximateFirstReceiveTimestamp", "SenderId"]
        )
        assert m["Attributes"]["ApproximateFirstReceiveTimestamp"] == str(t0 + 2000)
        assert set(m["Attributes"]) == {"ApproximateFirstReceiveTimestamp", "SenderId"}
    finally:
        await s.daemon.shutdown(timeout_s=1)


async def test_all_of_both_kinds_keeps_each_in_its_place(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = (await sqs.call(c.create_queue, QueueName="both"))["QueueUrl"]
    mine = {
        "ApproximateFirstReceiveTimestamp": {"DataType": "String", "StringValue": "mine"},
        "AWSTraceHeader": {"DataType": "String", "StringValue": "mine too"},
    }
    await sqs.call(
        c.send_message,
        QueueUrl=url,
        MessageBody="x",
        MessageAttributes=mine,
        MessageSystemAttributes=TRACE,
    )
    (m,) = await _receive(
        sqs, url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
    )
    assert m["MessageAttributes"] == mine
    assert m["MD5OfMessageAttributes"] == md5_of_attributes(mine)
    system = m["Attributes"]
    assert set(system) == {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
        "AWSTraceHeader",
    }
    assert system["AWSTraceHeader"] == "Root=1-abc"
    assert int(system["SentTimestamp"]) <= int(system["ApproximateFirstReceiveTimestamp"])
