"""SQS dead-letter redrive with real boto3 clients: StartMessageMoveTask,
ListMessageMoveTasks and CancelMessageMoveTask against an in-process daemon."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.helpers import eventually
from tests.integration.sqs import SqsDaemon, start

pytestmark = pytest.mark.timeout(60)
ARN = "arn:aws:sqs:us-east-1:000000000000:"


@pytest.fixture
async def sqs(tmp_path, store_section):
    session = aiohttp.ClientSession()
    d = await start(tmp_path, store_section, session)
    yield d
    await d.daemon.shutdown(timeout_s=1)
    await session.close()


async def _pair(s: SqsDaemon, name: str, max_receives: int = 1) -> tuple[str, str]:
    """A queue and its dead-letter queue ``<name>-dlq``: (source url, dlq url)."""
    dlq = (await s.call(s.sqs.create_queue, QueueName=f"{name}-dlq"))["QueueUrl"]
    policy = json.dumps(
        {"deadLetterTargetArn": ARN + f"{name}-dlq", "maxReceiveCount": max_receives}
    )
    src = (await s.call(s.sqs.create_queue, QueueName=name, Attributes={"RedrivePolicy": policy}))[
        "QueueUrl"
    ]
    return src, dlq


async def _tasks(s: SqsDaemon, source: str, n: int = 10) -> list[dict[str, Any]]:
    out = await s.call(s.sqs.list_message_move_tasks, SourceArn=ARN + source, MaxResults=n)
    return list(out["Results"])


async def _finished(s: SqsDaemon, source: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        latest = (await _tasks(s, source, 1))[0]
        return latest if latest["Status"] not in ("RUNNING", "CANCELLING") else None

    return await eventually(done)


async def test_dead_letters_move_back_to_their_source_with_ids_kept_and_receives_reset(
    sqs: SqsDaemon,
) -> None:
    c = sqs.sqs
    src, dlq = await _pair(sqs, "work")
    sent = await sqs.call(c.send_message, QueueUrl=src, MessageBody="poison")
    (m,) = (await sqs.call(c.receive_message, QueueUrl=src, VisibilityTimeout=0))["Messages"]
    # its one receive is spent: the next receive dead-letters it
    assert "Messages" not in await sqs.call(c.receive_message, QueueUrl=src)
    for i in range(4):
        await sqs.call(c.send_message, QueueUrl=dlq, MessageBody=f"dead {i}")
    handle = (await sqs.call(c.start_message_move_task, SourceArn=ARN + "work-dlq"))["TaskHandle"]
    assert handle
    task = await _finished(sqs, "work-dlq")
    assert task["Status"] == "COMPLETED"
    assert task["ApproximateNumberOfMessagesMoved"] == 5
    assert task["ApproximateNumberOfMessagesToMove"] == 5
    assert task["DestinationArn"] == ARN + "work"
    assert "TaskHandle" not in task  # only a running task shows its handle
    got = (
        await sqs.call(
            c.receive_message, QueueUrl=src, MaxNumberOfMessages=10, AttributeNames=["All"]
        )
    )["Messages"]
    assert sorted(x["Body"] for x in got) == ["dead 0", "dead 1", "dead 2", "dead 3", "poison"]
    poison = next(x for x in got if x["Body"] == "poison")
    assert poison["MessageId"] == sent["MessageId"] == m["MessageId"]
    assert all(x["Attributes"]["ApproximateReceiveCount"] == "1" for x in got)
    assert "Messages" not in await sqs.call(c.receive_message, QueueUrl=dlq)


async def test_a_move_to_a_named_destination_and_its_rate(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    _, dlq = await _pair(sqs, "chores")
    other = (await sqs.call(c.create_queue, QueueName="elsewhere"))["QueueUrl"]
    await sqs.call(
        c.send_message_batch,
        QueueUrl=dlq,
        Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)],
    )
    await sqs.call(
        c.start_message_move_task,
        SourceArn=ARN + "chores-dlq",
        DestinationArn=ARN + "elsewhere",
        MaxNumberOfMessagesPerSecond=50,
    )
    task = await _finished(sqs, "chores-dlq")
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 3)
    assert task["MaxNumberOfMessagesPerSecond"] == 50
    got = await sqs.call(c.receive_message, QueueUrl=other, MaxNumberOfMessages=10)
    assert sorted(x["Body"] for x in got["Messages"]) == ["m0", "m1", "m2"]


async def test_one_task_per_source_and_cancel(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    _, dlq = await _pair(sqs, "slow")
    await sqs.call(
        c.send_message_batch,
        QueueUrl=dlq,
        Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)],
    )
    handle = (
        await sqs.call(
            c.start_message_move_task, SourceArn=ARN + "slow-dlq", MaxNumberOfMessagesPerSecond=1
        )
    )["TaskHandle"]
    with pytest.raises(c.exceptions.UnsupportedOperation):
        await sqs.call(c.start_message_move_task, SourceArn=ARN + "slow-dlq")
    (running,) = await _tasks(sqs, "slow-dlq")
    assert running["Status"] == "RUNNING" and running["TaskHandle"] == handle
    out = await sqs.call(c.cancel_message_move_task, TaskHandle=handle)
    assert 0 <= out["ApproximateNumberOfMessagesMoved"] < 10
    task = await _finished(sqs, "slow-dlq")
    assert task["Status"] == "CANCELLED"
    moved = task["ApproximateNumberOfMessagesMoved"]
    assert moved < 10
    with pytest.raises(c.exceptions.UnsupportedOperation):  # not running any more
        await sqs.call(c.cancel_message_move_task, TaskHandle=handle)
    left = await sqs.call(
        c.get_queue_attributes, QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"]
    )
    assert int(left["Attributes"]["ApproximateNumberOfMessages"]) == 10 - moved
    # a new task may start now, and the listing is newest first
    await sqs.call(c.start_message_move_task, SourceArn=ARN + "slow-dlq")
    assert (await _finished(sqs, "slow-dlq"))["Status"] == "COMPLETED"
    assert [t["Status"] for t in await _tasks(sqs, "slow-dlq")] == ["COMPLETED", "CANCELLED"]
    assert len(await _tasks(sqs, "slow-dlq", 1)) == 1


async def test_move_task_errors_are_the_ones_sqs_models(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    await _pair(sqs, "e")
    await sqs.call(c.create_queue, QueueName="plain")
    with pytest.raises(c.exceptions.ResourceNotFoundException):
        await sqs.call(c.start_message_move_task, SourceArn=ARN + "missing")
    with pytest.raises(c.exceptions.ClientError) as e:
        await sqs.call(c.start_message_move_task, SourceArn=ARN + "plain")  # not a DLQ
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "Dead Letter Queue" in e.value.response["Error"]["Message"]
    with pytest.raises(c.exceptions.ResourceNotFoundException):
        await sqs.call(
            c.start_message_move_task, SourceArn=ARN + "e-dlq", DestinationArn=ARN + "nowhere"
        )
    with pytest.raises(c.exceptions.ClientError) as e:
        await sqs.call(
            c.start_message_move_task, SourceArn=ARN + "e-dlq", MaxNumberOfMessagesPerSecond=501
        )
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(c.exceptions.ResourceNotFoundException):
        await sqs.call(c.cancel_message_move_task, TaskHandle="bm90IGEgaGFuZGxl")
    with pytest.raises(c.exceptions.ResourceNotFoundException):
        await sqs.call(c.list_message_move_tasks, SourceArn=ARN + "missing")
    with pytest.raises(c.exceptions.ClientError) as e:
        await sqs.call(c.list_message_move_tasks, SourceArn=ARN + "e-dlq", MaxResults=11)
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert await _tasks(sqs, "e-dlq") == []


async def test_the_rest_api_sees_and_cancels_the_same_task(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    _, dlq = await _pair(sqs, "both")
    await sqs.call(
        c.send_message_batch,
        QueueUrl=dlq,
        Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)],
    )
    await sqs.call(
        c.start_message_move_task, SourceArn=ARN + "both-dlq", MaxNumberOfMessagesPerSecond=1
    )
    url = f"{sqs.base}/client/v4/accounts/local/move_tasks"
    async with sqs.session.get(url) as r:
        (task,) = (await r.json())["result"]
    assert (task["queue"], task["destination"], task["rate"]) == ("both-dlq", "both", 1)
    async with sqs.session.post(f"{url}/{task['id']}/cancel") as r:
        assert r.status == 200
        assert (await r.json())["result"]["state"] in ("cancelling", "cancelled")
    assert (await _finished(sqs, "both-dlq"))["Status"] == "CANCELLED"
