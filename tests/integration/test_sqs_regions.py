"""Queues kept apart per region: real signing boto3 clients of two regions against an
in-process daemon whose ``[sqs] region`` is us-east-1. The region comes from each request's
credential scope (QueueUrls carry none); the default region's queues are the Cloudflare
side's, another region's live under the store account ``local@<region>``."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import botocore.exceptions
import pytest

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


def _arn(region: str, name: str) -> str:
    return f"arn:aws:sqs:{region}:000000000000:{name}"


async def _bodies(s: SqsDaemon, c: Any, url: str) -> list[str]:
    out = await s.call(c.receive_message, QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    return sorted(m["Body"] for m in out.get("Messages", []))


async def _rest_names(s: SqsDaemon, account: str = "local") -> tuple[int, list[str]]:
    async with s.session.get(f"{s.base}/client/v4/accounts/{account}/queues") as r:
        body = await r.json()
        return r.status, sorted(q["queue_name"] for q in body.get("result") or [])


async def test_the_same_name_in_two_regions_is_two_queues(sqs: SqsDaemon) -> None:
    east = client(sqs.endpoint, signed=True, region="us-east-1")
    west = client(sqs.endpoint, signed=True, region="eu-west-1")
    e_url = (await sqs.call(east.create_queue, QueueName="jobs2"))["QueueUrl"]
    w_url = (await sqs.call(west.create_queue, QueueName="jobs2"))["QueueUrl"]
    assert e_url == w_url == f"{sqs.endpoint}/000000000000/jobs2"  # the URL names no region
    await sqs.call(east.send_message, QueueUrl=e_url, MessageBody="east")
    await sqs.call(west.send_message_batch, QueueUrl=w_url, Entries=[
        {"Id": "a", "MessageBody": "west-1"}, {"Id": "b", "MessageBody": "west-2"},
    ])  # fmt: skip
    attrs = ["QueueArn", "ApproximateNumberOfMessages"]
    e_attrs = await sqs.call(east.get_queue_attributes, QueueUrl=e_url, AttributeNames=attrs)
    w_attrs = await sqs.call(west.get_queue_attributes, QueueUrl=w_url, AttributeNames=attrs)
    assert e_attrs["Attributes"] == {
        "QueueArn": _arn("us-east-1", "jobs2"), "ApproximateNumberOfMessages": "1"
    }  # fmt: skip
    assert w_attrs["Attributes"] == {
        "QueueArn": _arn("eu-west-1", "jobs2"), "ApproximateNumberOfMessages": "2"
    }  # fmt: skip
    assert await _bodies(sqs, east, e_url) == ["east"]
    assert await _bodies(sqs, west, w_url) == ["west-1", "west-2"]
    # deleting one region's queue leaves the other's
    await sqs.call(west.delete_queue, QueueUrl=w_url)
    assert (await sqs.call(east.get_queue_url, QueueName="jobs2"))["QueueUrl"] == e_url
    with pytest.raises(west.exceptions.QueueDoesNotExist):
        await sqs.call(west.get_queue_url, QueueName="jobs2")


async def test_one_regions_client_cannot_reach_the_others_queue(sqs: SqsDaemon) -> None:
    east = client(sqs.endpoint, signed=True, region="us-east-1")
    west = client(sqs.endpoint, signed=True, region="eu-west-1")
    url = (await sqs.call(west.create_queue, QueueName="west-only"))["QueueUrl"]
    await sqs.call(west.send_message, QueueUrl=url, MessageBody="kept")
    for call, kwargs in [
        (east.get_queue_url, {"QueueName": "west-only"}),
        (east.send_message, {"QueueUrl": url, "MessageBody": "x"}),
        (east.receive_message, {"QueueUrl": url}),
        (east.get_queue_attributes, {"QueueUrl": url}),
        (east.purge_queue, {"QueueUrl": url}),
        (east.delete_queue, {"QueueUrl": url}),
    ]:
        with pytest.raises(east.exceptions.QueueDoesNotExist):
            await sqs.call(call, **kwargs)
    assert "QueueUrls" not in await sqs.call(east.list_queues, QueueNamePrefix="west")
    assert (await sqs.call(west.list_queues, QueueNamePrefix="west"))["QueueUrls"] == [url]
    assert await _bodies(sqs, west, url) == ["kept"]  # east's attempts changed nothing


async def test_the_default_regions_queues_are_the_cloudflare_sides(sqs: SqsDaemon) -> None:
    east = client(sqs.endpoint, signed=True, region="us-east-1")
    west = client(sqs.endpoint, signed=True, region="eu-west-1")
    unsigned = client(sqs.endpoint)  # no credential scope: [sqs] region
    await sqs.call(east.create_queue, QueueName="shared")
    await sqs.call(west.create_queue, QueueName="regional")
    status, names = await _rest_names(sqs)
    assert status == 200 and "shared" in names and "regional" not in names
    # the derived account is not an account of the REST API: it cannot be addressed
    status, _ = await _rest_names(sqs, "local@eu-west-1")
    assert status == 403
    assert sqs.daemon.store.queue("regional", "local@eu-west-1") is not None
    assert sqs.daemon.store.queue("regional", "local") is None
    # a Worker's producer binding sends to the default region's "jobs"
    await sqs.call(west.create_queue, QueueName="jobs")
    await sqs.worker_send("/send", {"body": "from a worker", "contentType": "text"})
    url = (await sqs.call(unsigned.get_queue_url, QueueName="jobs"))["QueueUrl"]
    assert await _bodies(sqs, unsigned, url) == ["from a worker"]
    assert await _bodies(sqs, west, url) == []


async def test_redrive_and_move_tasks_stay_in_their_region(sqs: SqsDaemon) -> None:
    east = client(sqs.endpoint, signed=True, region="us-east-1")
    west = client(sqs.endpoint, signed=True, region="eu-west-1")
    await sqs.call(east.create_queue, QueueName="work-dlq")  # east's, of the same name
    w_dlq = (await sqs.call(west.create_queue, QueueName="work-dlq"))["QueueUrl"]

    def policy(region: str) -> dict[str, str]:
        target = _arn(region, "work-dlq")
        return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": target, "maxReceiveCount": 1})}

    # a dead-letter target of another region does not exist for this one
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(west.create_queue, QueueName="work", Attributes=policy("us-east-1"))
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "Dead letter target does not exist" in e.value.response["Error"]["Message"]
    src = (await sqs.call(west.create_queue, QueueName="work", Attributes=policy("eu-west-1")))[
        "QueueUrl"
    ]
    got = await sqs.call(west.get_queue_attributes, QueueUrl=src, AttributeNames=["All"])
    assert json.loads(got["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"] == _arn(
        "eu-west-1", "work-dlq"
    )
    east_dlq = (await sqs.call(east.get_queue_url, QueueName="work-dlq"))["QueueUrl"]
    sources = await sqs.call(west.list_dead_letter_source_queues, QueueUrl=w_dlq)
    assert sources["queueUrls"] == [src]
    assert (await sqs.call(east.list_dead_letter_source_queues, QueueUrl=east_dlq))[
        "queueUrls"
    ] == []
    # a message received once dead-letters to west's DLQ at its next receive
    await sqs.call(west.send_message, QueueUrl=src, MessageBody="poison")
    out = await sqs.call(west.receive_message, QueueUrl=src, VisibilityTimeout=0)
    assert [x["Body"] for x in out["Messages"]] == ["poison"]
    assert "Messages" not in await sqs.call(west.receive_message, QueueUrl=src)
    assert await _bodies(sqs, east, east_dlq) == []
    out = await sqs.call(west.receive_message, QueueUrl=w_dlq, VisibilityTimeout=0)
    assert [x["Body"] for x in out["Messages"]] == ["poison"]
    # move tasks name queues by ARN: west's ARN is not east's queue, and back
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(east.start_message_move_task, SourceArn=_arn("eu-west-1", "work-dlq"))
    assert e.value.response["Error"]["Code"] == "ResourceNotFoundException"
    await sqs.call(west.start_message_move_task, SourceArn=_arn("eu-west-1", "work-dlq"))

    async def moved_back() -> list[str]:
        return await _bodies(sqs, west, src)

    assert await eventually(moved_back) == ["poison"]
    (task,) = (
        await sqs.call(west.list_message_move_tasks, SourceArn=_arn("eu-west-1", "work-dlq"))
    )["Results"]
    assert task["SourceArn"] == _arn("eu-west-1", "work-dlq")
    assert task["DestinationArn"] == _arn("eu-west-1", "work")
    east_tasks = await sqs.call(
        east.list_message_move_tasks, SourceArn=_arn("us-east-1", "work-dlq")
    )
    assert east_tasks["Results"] == []


async def test_a_malformed_region_is_refused(sqs: SqsDaemon) -> None:
    odd = client(sqs.endpoint, signed=True, region="EU-WEST-1")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(odd.list_queues)
    assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert "valid region" in e.value.response["Error"]["Message"]
