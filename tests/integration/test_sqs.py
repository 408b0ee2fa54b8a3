"""The SQS endpoint with real boto3 clients (and aws-cli) against an in-process daemon."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import botocore.exceptions
import pytest

from ocd.http.sqs.md5 import md5_hex
from tests.helpers import eventually
from tests.integration.sqs import SqsDaemon, client, start

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def sqs(tmp_path, store_section):
    session = aiohttp.ClientSession()
    d = await start(tmp_path, store_section, session)
    yield d
    await d.daemon.shutdown(timeout_s=1)
    await session.close()


async def _create(s: SqsDaemon, name: str, **attrs: str) -> str:
    out = await s.call(s.sqs.create_queue, QueueName=name, Attributes=attrs)
    return str(out["QueueUrl"])


# ---------------------------------------------------------------- queues


async def test_queue_lifecycle(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "Orders_1", VisibilityTimeout="45", DelaySeconds="0")
    assert url == f"{sqs.endpoint}/000000000000/Orders_1"
    # identical attributes: the same URL; different ones: QueueNameExists
    assert await _create(sqs, "Orders_1", VisibilityTimeout="45") == url
    with pytest.raises(c.exceptions.QueueNameExists):
        await _create(sqs, "Orders_1", VisibilityTimeout="46")
    assert (await sqs.call(c.get_queue_url, QueueName="Orders_1"))["QueueUrl"] == url
    with pytest.raises(c.exceptions.QueueDoesNotExist) as e:
        await sqs.call(c.get_queue_url, QueueName="missing")
    err = e.value.response["Error"]
    assert err["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert err["QueryErrorCode"] == "QueueDoesNotExist"
    attrs = (await sqs.call(c.get_queue_attributes, QueueUrl=url, AttributeNames=["All"]))[
        "Attributes"
    ]
    assert attrs["VisibilityTimeout"] == "45"
    assert attrs["QueueArn"] == "arn:aws:sqs:us-east-1:000000000000:Orders_1"
    assert attrs["ApproximateNumberOfMessages"] == "0"
    assert "FifoQueue" not in attrs
    await sqs.call(
        c.set_queue_attributes,
        QueueUrl=url,
        Attributes={"DelaySeconds": "5", "MessageRetentionPeriod": "600"},
    )
    attrs = (
        await sqs.call(
            c.get_queue_attributes,
            QueueUrl=url,
            AttributeNames=["DelaySeconds", "MessageRetentionPeriod"],
        )
    )["Attributes"]
    assert attrs == {"DelaySeconds": "5", "MessageRetentionPeriod": "600"}
    with pytest.raises(c.exceptions.InvalidAttributeName):
        await sqs.call(c.get_queue_attributes, QueueUrl=url, AttributeNames=["Nope"])
    with pytest.raises(c.exceptions.InvalidAttributeValue):
        await sqs.call(c.set_queue_attributes, QueueUrl=url, Attributes={"DelaySeconds": "901"})
    with pytest.raises(c.exceptions.InvalidAttributeValue):
        await sqs.call(c.set_queue_attributes, QueueUrl=url, Attributes={"FifoQueue": "true"})
    await sqs.call(c.delete_queue, QueueUrl=url)
    with pytest.raises(c.exceptions.QueueDoesNotExist):
        await sqs.call(c.delete_queue, QueueUrl=url)


async def test_list_queues_prefix_and_pages(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    for i in range(5):
        await _create(sqs, f"page-{i}")
    await _create(sqs, "other")
    out = await sqs.call(c.list_queues, QueueNamePrefix="page-")
    assert [u.rsplit("/", 1)[1] for u in out["QueueUrls"]] == [f"page-{i}" for i in range(5)]
    assert "NextToken" not in out
    seen: list[str] = []
    kwargs: dict[str, Any] = {"QueueNamePrefix": "page-", "MaxResults": 2}
    while True:
        out = await sqs.call(c.list_queues, **kwargs)
        seen += [u.rsplit("/", 1)[1] for u in out.get("QueueUrls", [])]
        if "NextToken" not in out:
            break
        kwargs["NextToken"] = out["NextToken"]
    assert seen == [f"page-{i}" for i in range(5)]
    assert "QueueUrls" not in await sqs.call(c.list_queues, QueueNamePrefix="zzz")


async def test_purge_and_its_sixty_seconds(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "purged")
    await sqs.call(c.send_message, QueueUrl=url, MessageBody="x")
    await sqs.call(c.purge_queue, QueueUrl=url)
    assert "Messages" not in await sqs.call(c.receive_message, QueueUrl=url)
    with pytest.raises(c.exceptions.PurgeQueueInProgress) as e:
        await sqs.call(c.purge_queue, QueueUrl=url)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


# ---------------------------------------------------------------- messages


async def test_send_receive_delete(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "plain")
    sent = await sqs.call(c.send_message, QueueUrl=url, MessageBody="hello")
    assert sent["MD5OfMessageBody"] == "5d41402abc4b2a76b9719d911017c592"
    before = int(time.time() * 1000)
    out = await sqs.call(
        c.receive_message,
        QueueUrl=url,
        MaxNumberOfMessages=10,
        MessageSystemAttributeNames=["All"],
        WaitTimeSeconds=1,
    )
    (m,) = out["Messages"]
    assert m["MessageId"] == sent["MessageId"]
    assert m["Body"] == "hello" and m["MD5OfBody"] == md5_hex(b"hello")
    assert m["Attributes"]["ApproximateReceiveCount"] == "1"
    assert abs(int(m["Attributes"]["SentTimestamp"]) - before) < 60_000
    attrs = (
        await sqs.call(
            c.get_queue_attributes,
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )
    )["Attributes"]
    assert attrs == {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "1",
    }
    await sqs.call(c.delete_message, QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    with pytest.raises(c.exceptions.ReceiptHandleIsInvalid):
        await sqs.call(c.delete_message, QueueUrl=url, ReceiptHandle="forged.handle")
    # a handle of another queue is not valid here
    other = await _create(sqs, "plain-2")
    with pytest.raises(c.exceptions.ReceiptHandleIsInvalid):
        await sqs.call(c.delete_message, QueueUrl=other, ReceiptHandle=m["ReceiptHandle"])
    assert "Messages" not in await sqs.call(c.receive_message, QueueUrl=url)


async def test_batches_and_their_errors(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "batched")
    entries = [{"Id": f"e{i}", "MessageBody": f"m{i}"} for i in range(10)]
    out = await sqs.call(c.send_message_batch, QueueUrl=url, Entries=entries)
    assert sorted(r["Id"] for r in out["Successful"]) == sorted(e["Id"] for e in entries)
    assert "Failed" not in out
    assert all(
        r["MD5OfMessageBody"] == md5_hex(f"m{r['Id'][1:]}".encode()) for r in out["Successful"]
    )
    with pytest.raises(c.exceptions.EmptyBatchRequest):
        await sqs.call(c.send_message_batch, QueueUrl=url, Entries=[])
    with pytest.raises(c.exceptions.TooManyEntriesInBatchRequest):
        await sqs.call(
            c.send_message_batch, QueueUrl=url, Entries=[*entries, {"Id": "x", "MessageBody": "x"}]
        )
    with pytest.raises(c.exceptions.BatchEntryIdsNotDistinct):
        await sqs.call(c.send_message_batch, QueueUrl=url, Entries=[entries[0], entries[0]])
    with pytest.raises(c.exceptions.InvalidBatchEntryId):
        await sqs.call(
            c.send_message_batch, QueueUrl=url, Entries=[{"Id": "a b", "MessageBody": "x"}]
        )
    # one bad entry fails alone, inside a 200
    out = await sqs.call(
        c.send_message_batch,
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "fine"},
            {"Id": "bad", "MessageBody": "x", "DelaySeconds": 901},
        ],
    )
    assert [r["Id"] for r in out["Successful"]] == ["ok"]
    assert out["Failed"][0]["Id"] == "bad" and out["Failed"][0]["SenderFault"] is True
    got: list[dict[str, Any]] = []
    while True:
        r = await sqs.call(c.receive_message, QueueUrl=url, MaxNumberOfMessages=10)
        if "Messages" not in r:
            break
        got += r["Messages"]
    assert len(got) == 11 and len({m["MessageId"] for m in got}) == 11
    dele = await sqs.call(
        c.delete_message_batch,
        QueueUrl=url,
        Entries=[{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)][
            :10
        ],
    )
    assert len(dele["Successful"]) == 10
    dele = await sqs.call(
        c.delete_message_batch,
        QueueUrl=url,
        Entries=[
            {"Id": "last", "ReceiptHandle": got[10]["ReceiptHandle"]},
            {"Id": "bad", "ReceiptHandle": "x"},
        ],
    )
    assert [r["Id"] for r in dele["Successful"]] == ["last"]
    assert dele["Failed"][0]["Code"] == "ReceiptHandleIsInvalid"


async def test_invalid_parameters(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "strict")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.receive_message, QueueUrl=url, MaxNumberOfMessages=11)
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(c.exceptions.InvalidMessageContents):
        await sqs.call(c.send_message, QueueUrl=url, MessageBody="bad \x01 char")
    with pytest.raises(c.exceptions.QueueDoesNotExist):
        await sqs.call(
            c.send_message, QueueUrl=f"{sqs.endpoint}/123456789012/strict", MessageBody="x"
        )


async def test_long_poll_is_woken_by_a_send(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "waiting")
    other = client(sqs.endpoint)
    started = time.monotonic()
    poll = asyncio.ensure_future(
        sqs.call(c.receive_message, QueueUrl=url, WaitTimeSeconds=15, MaxNumberOfMessages=10)
    )
    await eventually(lambda: sqs.daemon.store.queue("waiting") is not None)
    await asyncio.sleep(0)  # let the poll reach the daemon; the wait is what is measured
    await eventually(lambda: time.monotonic() - started > 0.3, timeout=5)
    sent_at = time.monotonic()
    await sqs.call(other.send_message, QueueUrl=url, MessageBody="wake")
    out = await asyncio.wait_for(poll, 10)
    woke = time.monotonic() - sent_at
    assert [m["Body"] for m in out["Messages"]] == ["wake"]
    assert woke < 2.0, woke
    # an empty long poll waits its time out, no longer
    t = time.monotonic()
    out = await sqs.call(c.receive_message, QueueUrl=url, WaitTimeSeconds=1)
    assert "Messages" not in out and 0.9 <= time.monotonic() - t < 5


async def test_visibility_timeouts(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "visible", VisibilityTimeout="60")
    await sqs.call(
        c.send_message_batch,
        QueueUrl=url,
        Entries=[{"Id": "a", "MessageBody": "a"}, {"Id": "b", "MessageBody": "b"}],
    )
    out = await sqs.call(
        c.receive_message,
        QueueUrl=url,
        MaxNumberOfMessages=10,
        AttributeNames=["ApproximateReceiveCount"],
    )
    assert len(out["Messages"]) == 2
    assert "Messages" not in await sqs.call(c.receive_message, QueueUrl=url)
    a, b = out["Messages"]
    await sqs.call(
        c.change_message_visibility,
        QueueUrl=url,
        ReceiptHandle=a["ReceiptHandle"],
        VisibilityTimeout=0,
    )
    again = await sqs.call(
        c.receive_message,
        QueueUrl=url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        VisibilityTimeout=1,
    )
    assert [m["Body"] for m in again["Messages"]] == [a["Body"]]
    assert again["Messages"][0]["Attributes"]["ApproximateReceiveCount"] == "2"
    # a receive's own VisibilityTimeout lapses and the message comes back
    back = await eventually(
        lambda: sqs.call(
            c.receive_message, QueueUrl=url, WaitTimeSeconds=5, AttributeNames=["All"]
        ),
        timeout=15,
    )
    assert back["Messages"][0]["Attributes"]["ApproximateReceiveCount"] == "3"
    batch = await sqs.call(
        c.change_message_visibility_batch,
        QueueUrl=url,
        Entries=[
            {"Id": "b", "ReceiptHandle": b["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "x", "ReceiptHandle": "nope", "VisibilityTimeout": 0},
        ],
    )
    assert [r["Id"] for r in batch["Successful"]] == ["b"]
    assert batch["Failed"][0]["Code"] == "ReceiptHandleIsInvalid"
    out = await sqs.call(c.receive_message, QueueUrl=url, WaitTimeSeconds=2)
    assert [m["Body"] for m in out["Messages"]] == ["b"]


async def test_dead_letter_by_max_receive_count(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    dlq = await _create(sqs, "work-dlq")
    dlq_arn = (await sqs.call(c.get_queue_attributes, QueueUrl=dlq, AttributeNames=["QueueArn"]))[
        "Attributes"
    ]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
    src = await _create(sqs, "work", RedrivePolicy=policy)
    got = (await sqs.call(c.get_queue_attributes, QueueUrl=src, AttributeNames=["RedrivePolicy"]))[
        "Attributes"
    ]["RedrivePolicy"]
    assert json.loads(got) == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}
    sources = await sqs.call(c.list_dead_letter_source_queues, QueueUrl=dlq)
    assert sources["queueUrls"] == [src]
    # the Cloudflare surface sees the same setting: the queue's pull consumer
    q = sqs.daemon.store.queue("work")
    assert q is not None
    consumer = sqs.daemon.store.pull_consumer(q)
    assert consumer is not None and consumer.dead_letter_queue == "work-dlq"
    assert consumer.max_retries == 1
    await sqs.call(c.send_message, QueueUrl=src, MessageBody="poison")
    for n in (1, 2):
        out = await sqs.call(
            c.receive_message, QueueUrl=src, AttributeNames=["All"], WaitTimeSeconds=2
        )
        (m,) = out["Messages"]
        assert m["Attributes"]["ApproximateReceiveCount"] == str(n)
        await sqs.call(
            c.change_message_visibility,
            QueueUrl=src,
            ReceiptHandle=m["ReceiptHandle"],
            VisibilityTimeout=0,
        )
    assert "Messages" not in await sqs.call(c.receive_message, QueueUrl=src)
    out = await sqs.call(c.receive_message, QueueUrl=dlq, WaitTimeSeconds=2)
    assert [m["Body"] for m in out["Messages"]] == ["poison"]
    with pytest.raises(botocore.exceptions.ClientError):
        await _create(
            sqs,
            "bad-target",
            RedrivePolicy=json.dumps(
                {
                    "deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:none",
                    "maxReceiveCount": 1,
                }
            ),
        )


# ---------------------------------------------------------------- FIFO


async def test_fifo_queue(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    with pytest.raises(botocore.exceptions.ClientError):
        await _create(sqs, "not-fifo", FifoQueue="true")
    url = await _create(sqs, "orders.fifo", FifoQueue="true")
    attrs = (await sqs.call(c.get_queue_attributes, QueueUrl=url, AttributeNames=["All"]))[
        "Attributes"
    ]
    assert attrs["FifoQueue"] == "true" and attrs["ContentBasedDeduplication"] == "false"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.send_message, QueueUrl=url, MessageBody="x")
    assert e.value.response["Error"]["Code"] == "MissingParameter"
    with pytest.raises(botocore.exceptions.ClientError):
        await sqs.call(c.send_message, QueueUrl=url, MessageBody="x", MessageGroupId="g")
    entries = [
        {
            "Id": f"e{i}",
            "MessageBody": f"m{i}",
            "MessageGroupId": "g",
            "MessageDeduplicationId": f"d{i}",
        }
        for i in range(3)
    ]
    out = await sqs.call(c.send_message_batch, QueueUrl=url, Entries=entries)
    seqs = [int(r["SequenceNumber"]) for r in out["Successful"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    dup = await sqs.call(
        c.send_message,
        QueueUrl=url,
        MessageBody="m0",
        MessageGroupId="g",
        MessageDeduplicationId="d0",
    )
    assert dup["MessageId"] == out["Successful"][0]["MessageId"]
    got = await sqs.call(
        c.receive_message, QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    )
    assert [m["Body"] for m in got["Messages"]] == ["m0", "m1", "m2"]
    first = got["Messages"][0]["Attributes"]
    assert first["MessageGroupId"] == "g" and first["MessageDeduplicationId"] == "d0"
    assert int(first["SequenceNumber"]) == seqs[0]
    cbd = await _create(sqs, "cbd.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    a = await sqs.call(c.send_message, QueueUrl=cbd, MessageBody="same", MessageGroupId="g")
    b = await sqs.call(c.send_message, QueueUrl=cbd, MessageBody="same", MessageGroupId="g")
    assert a["MessageId"] == b["MessageId"]


# ---------------------------------------------------------------- SQS's own words for errors


def _error(e: pytest.ExceptionInfo[botocore.exceptions.ClientError]) -> tuple[str, str]:
    err = e.value.response["Error"]
    return err["Code"], err["Message"]


async def test_batch_entry_problems_fail_alone_request_problems_fail_the_call(
    sqs: SqsDaemon,
) -> None:
    c = sqs.sqs
    url = await _create(sqs, "small", MaximumMessageSize="1024")
    bad_attr = {"a": {"DataType": "String", "StringValue": ""}}
    out = await sqs.call(
        c.send_message_batch,
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "fine"},
            {"Id": "late", "MessageBody": "x", "DelaySeconds": 901},
            {"Id": "big", "MessageBody": "b" * 1025},
            {"Id": "attr", "MessageBody": "x", "MessageAttributes": bad_attr},
        ],
    )
    assert [r["Id"] for r in out["Successful"]] == ["ok"]
    assert {f["Id"]: (f["Code"], f["Message"], f["SenderFault"]) for f in out["Failed"]} == {
        "late": (
            "InvalidParameterValue",
            "Value 901 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be "
            ">= 0 and <= 900.",
            True,
        ),
        "big": (
            "InvalidParameterValue",
            "One or more parameters cannot be validated. Reason: Message must be shorter than "
            "1024 bytes.",
            True,
        ),
        "attr": (
            "InvalidParameterValue",
            "Message (user) attribute 'a' must contain a non-empty value of type 'String'.",
            True,
        ),
    }
    # the same problems in a SendMessage fail it, in the single-message wording
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.send_message, QueueUrl=url, MessageBody="x", DelaySeconds=901)
    assert _error(e)[1].endswith("Reason: DelaySeconds must be >= 0 and <= 900.")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.send_message, QueueUrl=url, MessageBody="b" * 1025)
    assert _error(e) == (
        "InvalidParameterValue",
        "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes.",
    )
    # an empty batch names the batch action
    for op, kw in (
        (c.send_message_batch, "SendMessageBatch"),
        (c.delete_message_batch, "DeleteMessageBatch"),
        (c.change_message_visibility_batch, "ChangeMessageVisibilityBatch"),
    ):
        with pytest.raises(c.exceptions.EmptyBatchRequest) as e:
            await sqs.call(op, QueueUrl=url, Entries=[])
        assert _error(e) == (
            "AWS.SimpleQueueService.EmptyBatchRequest",
            f"There should be at least one {kw}RequestEntry in the request.",
        )
    # a FIFO entry without its group or deduplication id fails the whole batch, sending none
    fifo = await _create(sqs, "strict.fifo", FifoQueue="true")
    good = {"Id": "ok", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d"}
    no_group = ("MissingParameter", "The request must contain the parameter MessageGroupId.")
    no_dedup = (
        "InvalidParameterValue",
        "The queue should either have ContentBasedDeduplication enabled or "
        "MessageDeduplicationId provided explicitly",
    )
    for entry, answer in (
        ({"Id": "nogroup", "MessageBody": "y", "MessageDeduplicationId": "e"}, no_group),
        ({"Id": "neither", "MessageBody": "y"}, no_group),
        ({"Id": "nodedup", "MessageBody": "y", "MessageGroupId": "g"}, no_dedup),
    ):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            await sqs.call(c.send_message_batch, QueueUrl=fifo, Entries=[good, entry])
        assert _error(e) == answer
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        # SendMessage on its own gets the same answer
        single = {k: v for k, v in entry.items() if k != "Id"}
        with pytest.raises(botocore.exceptions.ClientError) as e:
            await sqs.call(c.send_message, QueueUrl=fifo, **single)
        assert _error(e) == answer
    got = await sqs.call(c.receive_message, QueueUrl=fifo, WaitTimeSeconds=0)
    assert "Messages" not in got
    # too many entries and repeated ids fail the call, in SQS's words
    eleven = [{"Id": f"e{i}", "MessageBody": "x"} for i in range(11)]
    with pytest.raises(c.exceptions.TooManyEntriesInBatchRequest) as e:
        await sqs.call(c.send_message_batch, QueueUrl=url, Entries=eleven)
    assert _error(e) == (
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        "Maximum number of entries per request are 10. You have sent 11.",
    )
    with pytest.raises(c.exceptions.BatchEntryIdsNotDistinct) as e:
        await sqs.call(c.send_message_batch, QueueUrl=url, Entries=[eleven[0], eleven[0]])
    assert _error(e) == ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id e0 repeated.")


async def test_invalid_receipt_handles_in_sqs_words(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "handles")
    text = 'The input receipt handle "bogus" is not a valid receipt handle.'
    with pytest.raises(c.exceptions.ReceiptHandleIsInvalid) as e:
        await sqs.call(c.delete_message, QueueUrl=url, ReceiptHandle="bogus")
    assert _error(e) == ("ReceiptHandleIsInvalid", text)
    with pytest.raises(c.exceptions.ReceiptHandleIsInvalid) as e:
        await sqs.call(
            c.change_message_visibility, QueueUrl=url, ReceiptHandle="bogus", VisibilityTimeout=5
        )
    assert _error(e) == ("ReceiptHandleIsInvalid", text)
    entries = [{"Id": "b", "ReceiptHandle": "bogus"}]
    out = await sqs.call(c.delete_message_batch, QueueUrl=url, Entries=entries)
    assert out["Failed"] == [
        {"Id": "b", "SenderFault": True, "Code": "ReceiptHandleIsInvalid", "Message": text}
    ]
    out = await sqs.call(
        c.change_message_visibility_batch,
        QueueUrl=url,
        Entries=[{**entries[0], "VisibilityTimeout": 5}],
    )
    assert out["Failed"] == [
        {"Id": "b", "SenderFault": True, "Code": "ReceiptHandleIsInvalid", "Message": text}
    ]


async def test_create_queue_of_an_existing_name_with_other_attributes(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = await _create(sqs, "again", DelaySeconds="5")
    assert await _create(sqs, "again", DelaySeconds="5") == url
    with pytest.raises(c.exceptions.QueueNameExists) as e:
        await _create(sqs, "again", DelaySeconds="6")
    assert _error(e) == (
        "QueueAlreadyExists",
        "A queue already exists with the same name and a different value for attribute "
        "DelaySeconds",
    )
    # attributes only a FIFO queue has are unknown on a standard one, in SQS's words
    with pytest.raises(c.exceptions.InvalidAttributeName) as e:
        await _create(sqs, "plain", DeduplicationScope="queue")
    assert (
        _error(e)[1] == "You can specify the DeduplicationScope only when FifoQueue is set to true."
    )
    with pytest.raises(c.exceptions.InvalidAttributeName) as e:
        await _create(sqs, "plain", ContentBasedDeduplication="true")
    assert _error(e)[1] == "Unknown Attribute ContentBasedDeduplication."


async def test_a_body_over_the_listeners_limit_is_a_message_too_long(sqs: SqsDaemon) -> None:
    """The listener reads at most 2 MiB; a larger request is answered in SQS's envelope
    with SQS's error, its body read to the end so the connection survives."""
    c = sqs.sqs
    url = await _create(sqs, "huge")
    body = "h" * (3 * 1024 * 1024)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.send_message, QueueUrl=url, MessageBody=body)
    assert _error(e) == (
        "InvalidParameterValue",
        "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.",
    )
    with pytest.raises(c.exceptions.BatchRequestTooLong) as e:
        await sqs.call(
            c.send_message_batch, QueueUrl=url, Entries=[{"Id": "a", "MessageBody": body}]
        )
    assert _error(e)[1].startswith("Batch requests cannot be longer than 1048576 bytes.")
    # the same client (and its kept-alive connection) goes on working
    await sqs.call(c.send_message, QueueUrl=url, MessageBody="small")
    got = await sqs.call(c.receive_message, QueueUrl=url, WaitTimeSeconds=5)
    assert [m["Body"] for m in got["Messages"]] == ["small"]


# ---------------------------------------------------------------- one store for everything


async def test_worker_messages_read_over_sqs(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    await sqs.worker_send("/send", {"body": {"a": 1}})
    await sqs.worker_send("/send", {"body": "plain", "contentType": "text"})
    await sqs.worker_send(
        "/send", {"b64": base64.b64encode(b"\x00\xff").decode(), "contentType": "bytes"}
    )
    url = (await sqs.call(c.get_queue_url, QueueName="jobs"))["QueueUrl"]
    got: list[dict[str, Any]] = []
    while len(got) < 3:
        out = await sqs.call(
            c.receive_message,
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            WaitTimeSeconds=2,
        )
        got += out.get("Messages", [])
    assert [json.loads(got[0]["Body"]), got[1]["Body"]] == [{"a": 1}, "plain"]
    assert "MessageAttributes" not in got[0]
    assert base64.b64decode(got[2]["Body"]) == b"\x00\xff"
    attr = got[2]["MessageAttributes"]["ocd.contentType"]
    assert attr == {"DataType": "String", "StringValue": "bytes"}
    assert got[2]["MD5OfMessageAttributes"]


async def test_sqs_messages_reach_a_worker(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = (await sqs.call(c.get_queue_url, QueueName="worked"))["QueueUrl"]
    await sqs.call(c.send_message, QueueUrl=url, MessageBody='{"not": "parsed"}')

    def recorded() -> list[dict[str, Any]]:
        if not sqs.record.exists():
            return []
        return [json.loads(line) for line in sqs.record.read_text().splitlines() if line]

    (line,) = await eventually(recorded)
    assert line["queue"] == "worked" and line["type"] == "str"
    assert line["body"] == '{"not": "parsed"}'


# ---------------------------------------------------------------- botocore's own model


def _model() -> Any:
    import botocore.loaders

    return botocore.loaders.Loader().load_service_model("sqs", "service-2")


def _check_shape(model: dict[str, Any], shape_name: str, value: Any, path: str) -> None:
    shape = model["shapes"][shape_name]
    kind = shape["type"]
    if kind == "structure":
        assert isinstance(value, dict), path
        members = shape.get("members", {})
        for key, v in value.items():
            assert key in members, f"{path}.{key} is not a member of {shape_name}"
            _check_shape(model, members[key]["shape"], v, f"{path}.{key}")
        # AWS leaves an empty Successful or Failed list out of a batch result (recorded in
        # LocalStack's AWS snapshots) although the model marks both required
        for req in set(shape.get("required", [])) - {"Successful", "Failed"}:
            assert req in value, f"{path}: required {req} missing"
    elif kind == "list":
        assert isinstance(value, list), path
        for i, v in enumerate(value):
            _check_shape(model, shape["member"]["shape"], v, f"{path}[{i}]")
    elif kind == "map":
        assert isinstance(value, dict), path
        for k, v in value.items():
            _check_shape(model, shape["key"]["shape"], k, f"{path}<key>")
            _check_shape(model, shape["value"]["shape"], v, f"{path}.{k}")
    elif kind in ("string", "blob"):
        assert isinstance(value, str), path
        if "enum" in shape:
            assert value in shape["enum"], f"{path}: {value!r} not in the enum"
    elif kind in ("integer", "long"):
        assert isinstance(value, int) and not isinstance(value, bool), path
    elif kind == "boolean":
        assert isinstance(value, bool), path


async def test_shapes_match_botocores_model(sqs: SqsDaemon) -> None:
    model = _model()
    from ocd.http.sqs.actions import ACTION_NAMES

    assert set(ACTION_NAMES) == set(model["operations"])

    async def call(op: str, body: dict[str, Any]) -> dict[str, Any]:
        # the request must be valid input, the reply valid output
        _check_shape(model, model["operations"][op]["input"]["shape"], body, op)
        status, headers, out = await sqs.raw(op, body)
        assert status == 200, out
        assert headers["Content-Type"].startswith("application/x-amz-json-1.0")
        output = model["operations"][op].get("output")
        if output is not None:
            _check_shape(model, output["shape"], out, op)
        else:
            assert out == {}
        return out

    url = (await call("CreateQueue", {"QueueName": "shapes"}))["QueueUrl"]
    furl = (
        await call(
            "CreateQueue",
            {
                "QueueName": "shapes.fifo",
                "Attributes": {"FifoQueue": "true", "ContentBasedDeduplication": "true"},
            },
        )
    )["QueueUrl"]
    await call("GetQueueUrl", {"QueueName": "shapes"})
    await call("ListQueues", {"MaxResults": 1})
    await call("GetQueueAttributes", {"QueueUrl": furl, "AttributeNames": ["All"]})
    await call("SetQueueAttributes", {"QueueUrl": url, "Attributes": {"VisibilityTimeout": "10"}})
    await call("SendMessage", {"QueueUrl": url, "MessageBody": "x"})
    await call(
        "SendMessage",
        {
            "QueueUrl": url,
            "MessageBody": "x",
            "MessageAttributes": {"a": {"DataType": "Binary", "BinaryValue": "AAE="}},
            "MessageSystemAttributes": {
                "AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc"}
            },
        },
    )
    await call("SendMessage", {"QueueUrl": furl, "MessageBody": "x", "MessageGroupId": "g"})
    await call(
        "SendMessageBatch",
        {
            "QueueUrl": url,
            "Entries": [
                {"Id": "a", "MessageBody": "y"},
                {"Id": "b", "MessageBody": "z", "DelaySeconds": 1000},
            ],
        },
    )
    got = await call(
        "ReceiveMessage",
        {
            "QueueUrl": url,
            "MaxNumberOfMessages": 10,
            "MessageSystemAttributeNames": ["All"],
            "MessageAttributeNames": ["All"],
        },
    )
    await call("ReceiveMessage", {"QueueUrl": furl, "MessageSystemAttributeNames": ["All"]})
    h = [m["ReceiptHandle"] for m in got["Messages"]]
    await call(
        "ChangeMessageVisibility", {"QueueUrl": url, "ReceiptHandle": h[0], "VisibilityTimeout": 5}
    )
    await call(
        "ChangeMessageVisibilityBatch",
        {"QueueUrl": url, "Entries": [{"Id": "a", "ReceiptHandle": h[0], "VisibilityTimeout": 0}]},
    )
    await call("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": h[0]})
    await call(
        "DeleteMessageBatch",
        {
            "QueueUrl": url,
            "Entries": [{"Id": "a", "ReceiptHandle": h[1]}, {"Id": "b", "ReceiptHandle": "bad"}],
        },
    )
    await call("TagQueue", {"QueueUrl": url, "Tags": {"a": "b"}})
    assert (await call("ListQueueTags", {"QueueUrl": url}))["Tags"] == {"a": "b"}
    await call("UntagQueue", {"QueueUrl": url, "TagKeys": ["a"]})
    await call(
        "AddPermission",
        {"QueueUrl": url, "Label": "l", "AWSAccountIds": ["111122223333"], "Actions": ["*"]},
    )
    await call("RemovePermission", {"QueueUrl": url, "Label": "l"})
    await call("ListDeadLetterSourceQueues", {"QueueUrl": url})
    await call("PurgeQueue", {"QueueUrl": url})
    await call("DeleteQueue", {"QueueUrl": url})
    # errors carry the shape name, a message and the query-compatible header
    status, headers, out = await sqs.raw("GetQueueUrl", {"QueueName": "gone"})
    assert status == 400
    assert out == {
        "__type": "com.amazonaws.sqs#QueueDoesNotExist",
        "message": "The specified queue does not exist.",
    }
    assert headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert "QueueDoesNotExist" in model["shapes"]


# ---------------------------------------------------------------- aws-cli


@pytest.mark.timeout(120)
async def test_aws_cli(sqs: SqsDaemon, tmp_path: Path) -> None:
    aws = shutil.which("aws", path=str(Path(sys.executable).parent))
    assert aws is not None, "awscli is in the dev extras"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "AKIDTEST",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }

    async def run(*args: str) -> Any:
        p = await asyncio.create_subprocess_exec(
            aws, "sqs", *args, "--endpoint-url", sqs.endpoint, "--output", "json",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(p.communicate(), 60)
        assert p.returncode == 0, err.decode()
        return json.loads(out) if out.strip() else None

    url = (await run("create-queue", "--queue-name", "cli"))["QueueUrl"]
    assert url.endswith("/000000000000/cli")
    await run("send-message", "--queue-url", url, "--message-body", "from the cli")
    got = await run("receive-message", "--queue-url", url, "--wait-time-seconds", "2")
    (m,) = got["Messages"]
    assert m["Body"] == "from the cli"
    await run("delete-message", "--queue-url", url, "--receipt-handle", m["ReceiptHandle"])
    listed = await run("list-queues")
    assert url in listed["QueueUrls"]


async def test_a_wait_time_out_of_range_is_refused_in_sqss_words(sqs: SqsDaemon) -> None:
    url = await _create(sqs, "waits")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(sqs.sqs.receive_message, QueueUrl=url, WaitTimeSeconds=21)
    err = e.value.response["Error"]
    assert err["Code"] == "InvalidParameterValue"
    assert err["Message"] == (
        "Value 21 for parameter WaitTimeSeconds is invalid. "
        "Reason: Must be >= 0 and <= 20, if provided."
    )
