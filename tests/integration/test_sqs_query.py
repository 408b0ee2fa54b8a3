"""The Query protocol: a real botocore client speaking it (the query-era service model,
``tests/data/sqs-query``), and raw form requests as curl scripts send them, checked
against the XML shapes SQS documents."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import aiohttp
import boto3
import botocore
import botocore.exceptions
import botocore.session
import pytest
from botocore.config import Config

from ocd.http.sqs.md5 import md5_of_attributes
from tests.integration.sqs import SqsDaemon, start

pytestmark = pytest.mark.timeout(60)
MODELS = Path(__file__).resolve().parent.parent / "data" / "sqs-query"
NS = {"s": "http://queue.amazonaws.com/doc/2012-11-05/"}


def query_client(endpoint: str) -> Any:
    session = botocore.session.get_session()
    session.get_component("data_loader").search_paths.insert(0, str(MODELS))
    cfg = Config(retries={"max_attempts": 1}, signature_version=botocore.UNSIGNED)
    client = boto3.session.Session(botocore_session=session).client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1", config=cfg
    )
    assert client.meta.service_model.protocol == "query"
    return client


@pytest.fixture
async def sqs(tmp_path, store_section):
    session = aiohttp.ClientSession()
    d = await start(tmp_path, store_section, session)
    yield d
    await d.daemon.shutdown(timeout_s=1)
    await session.close()


async def test_every_action_over_the_query_protocol_with_botocore(sqs: SqsDaemon) -> None:
    c = query_client(sqs.endpoint)
    call = sqs.call
    url = (
        await call(
            c.create_queue,
            QueueName="q1",
            Attributes={"VisibilityTimeout": "40"},
            tags={"team": "ops"},
        )
    )["QueueUrl"]
    assert url == f"{sqs.endpoint}/000000000000/q1"
    dlq = (await call(c.create_queue, QueueName="q1-dlq"))["QueueUrl"]
    assert (await call(c.get_queue_url, QueueName="q1"))["QueueUrl"] == url
    listed = await call(c.list_queues, QueueNamePrefix="q1", MaxResults=1)
    assert listed["QueueUrls"] == [url] and "NextToken" in listed
    arn = "arn:aws:sqs:us-east-1:000000000000:q1-dlq"
    await call(
        c.set_queue_attributes,
        QueueUrl=url,
        Attributes={"RedrivePolicy": f'{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"3"}}'},
    )
    attrs = (await call(c.get_queue_attributes, QueueUrl=url, AttributeNames=["All"]))["Attributes"]
    assert attrs["VisibilityTimeout"] == "40" and '"maxReceiveCount":3' in attrs["RedrivePolicy"]
    assert (await call(c.list_dead_letter_source_queues, QueueUrl=dlq))["queueUrls"] == [url]

    mattrs = {
        "s": {"DataType": "String", "StringValue": 'a "quoted"\r\nvalue & <more>'},
        "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
    }
    sent = await call(c.send_message, QueueUrl=url, MessageBody="hé <x>", MessageAttributes=mattrs)
    wire = {**mattrs, "b": {"DataType": "Binary", "BinaryValue": base64.b64encode(b"\x00\xff")}}
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(
        {k: {kk: vv.decode() if isinstance(vv, bytes) else vv for kk, vv in v.items()}
         for k, v in wire.items()}
    )  # fmt: skip
    number = {"n": {"DataType": "Number", "StringValue": "1"}}
    batch = await call(
        c.send_message_batch,
        QueueUrl=url,
        Entries=[
            {"Id": "a", "MessageBody": "one", "MessageAttributes": number},
            {"Id": "b", "MessageBody": "two", "DelaySeconds": 901},
        ],
    )
    assert [e["Id"] for e in batch["Successful"]] == ["a"]
    assert batch["Failed"][0]["Id"] == "b" and batch["Failed"][0]["SenderFault"] is True
    got = (
        await call(
            c.receive_message,
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
            WaitTimeSeconds=1,
        )
    )["Messages"]
    by_body = {m["Body"]: m for m in got}
    assert set(by_body) == {"hé <x>", "one"}
    m = by_body["hé <x>"]
    assert m["MessageAttributes"]["s"]["StringValue"] == 'a "quoted"\r\nvalue & <more>'
    assert m["MessageAttributes"]["b"]["BinaryValue"] == b"\x00\xff"
    assert m["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert m["Attributes"]["ApproximateReceiveCount"] == "1"
    h1, h2 = m["ReceiptHandle"], by_body["one"]["ReceiptHandle"]
    await call(c.change_message_visibility, QueueUrl=url, ReceiptHandle=h1, VisibilityTimeout=60)
    out = await call(
        c.change_message_visibility_batch,
        QueueUrl=url,
        Entries=[{"Id": "x", "ReceiptHandle": h2, "VisibilityTimeout": 60}],
    )
    assert out["Successful"] == [{"Id": "x"}]
    await call(c.delete_message, QueueUrl=url, ReceiptHandle=h1)
    out = await call(
        c.delete_message_batch,
        QueueUrl=url,
        Entries=[{"Id": "x", "ReceiptHandle": h2}, {"Id": "y", "ReceiptHandle": "bogus"}],
    )
    assert out["Successful"] == [{"Id": "x"}] and out["Failed"][0]["Id"] == "y"
    await call(c.tag_queue, QueueUrl=url, Tags={"env": "dev"})
    await call(c.untag_queue, QueueUrl=url, TagKeys=["team"])
    assert (await call(c.list_queue_tags, QueueUrl=url))["Tags"] == {"env": "dev"}
    await call(
        c.add_permission,
        QueueUrl=url,
        Label="p",
        AWSAccountIds=["111122223333"],
        Actions=["SendMessage"],
    )
    await call(c.remove_permission, QueueUrl=url, Label="p")
    await call(c.purge_queue, QueueUrl=url)
    # errors come back as XML the query parser turns into the modelled classes
    with pytest.raises(c.exceptions.QueueDoesNotExist) as e:
        await call(c.get_queue_url, QueueName="missing")
    assert e.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    with pytest.raises(c.exceptions.PurgeQueueInProgress):
        await call(c.purge_queue, QueueUrl=url)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await call(c.receive_message, QueueUrl=url, MaxNumberOfMessages=11)
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    await call(c.delete_queue, QueueUrl=url)
    assert "QueueUrls" not in await call(c.list_queues, QueueNamePrefix="q1-x")


async def _form(
    s: SqsDaemon, path: str, params: dict[str, str], method: str = "POST"
) -> tuple[int, ET.Element]:
    url = s.endpoint + path
    if method == "GET":
        ctx = s.session.get(url, params=params)
    else:
        ctx = s.session.post(url, data=params)  # application/x-www-form-urlencoded
    async with ctx as r:
        assert r.headers["Content-Type"].startswith("text/xml")
        return r.status, ET.fromstring(await r.text())


async def test_raw_form_requests_as_curl_sends_them(sqs: SqsDaemon) -> None:
    v = {"Version": "2012-11-05"}
    status, root = await _form(
        sqs,
        "/",
        {
            "Action": "CreateQueue", "QueueName": "raw", **v,
            "Attribute.1.Name": "DelaySeconds", "Attribute.1.Value": "0",
        },
    )  # fmt: skip
    assert status == 200 and root.tag == f"{{{NS['s']}}}CreateQueueResponse"
    url = root.findtext("s:CreateQueueResult/s:QueueUrl", namespaces=NS)
    assert url == f"{sqs.endpoint}/000000000000/raw"
    assert root.findtext("s:ResponseMetadata/s:RequestId", namespaces=NS)
    # posted to the queue's own URL, in the Java SDK v2's member-name style
    status, root = await _form(
        sqs,
        "/000000000000/raw",
        {
            "Action": "SendMessage", "MessageBody": "hi", **v,
            "MessageAttributes.1.Name": "k", "MessageAttributes.1.Value.DataType": "String",
            "MessageAttributes.1.Value.StringValue": "v",
        },
    )  # fmt: skip
    assert status == 200
    result = root.find("s:SendMessageResult", NS)
    assert result is not None
    assert (
        result.findtext("s:MD5OfMessageBody", namespaces=NS) == "49f68a5c8493ec2c0bf489821c21fc3b"
    )
    assert result.findtext("s:MD5OfMessageAttributes", namespaces=NS) == md5_of_attributes(
        {"k": {"DataType": "String", "StringValue": "v"}}
    )
    # a GET with a query string works too
    status, root = await _form(
        sqs,
        "/",
        {
            "Action": "ReceiveMessage", "QueueUrl": url or "", **v,
            "MessageAttributeName.1": "All", "AttributeName.1": "SentTimestamp",
        },
        method="GET",
    )  # fmt: skip
    assert status == 200
    (msg,) = root.findall("s:ReceiveMessageResult/s:Message", NS)
    assert msg.findtext("s:Body", namespaces=NS) == "hi"
    assert [a.findtext("s:Name", namespaces=NS) for a in msg.findall("s:Attribute", NS)] == [
        "SentTimestamp"
    ]
    (ma,) = msg.findall("s:MessageAttribute", NS)
    assert ma.findtext("s:Name", namespaces=NS) == "k"
    assert ma.findtext("s:Value/s:StringValue", namespaces=NS) == "v"
    assert ma.findtext("s:Value/s:DataType", namespaces=NS) == "String"
    # errors: <ErrorResponse> with the query code, type and the query-era status
    status, root = await _form(sqs, "/", {"Action": "GetQueueUrl", "QueueName": "nope", **v})
    assert status == 400 and root.tag == f"{{{NS['s']}}}ErrorResponse"
    assert root.findtext("s:Error/s:Type", namespaces=NS) == "Sender"
    assert (
        root.findtext("s:Error/s:Code", namespaces=NS) == "AWS.SimpleQueueService.NonExistentQueue"
    )
    assert root.findtext("s:RequestId", namespaces=NS)
    status, root = await _form(sqs, "/", {"Action": "Frobnicate", **v})
    assert status == 400 and root.findtext("s:Error/s:Code", namespaces=NS) == "InvalidAction"


async def test_errors_in_sqss_words_over_the_query_protocol(sqs: SqsDaemon) -> None:
    c = query_client(sqs.endpoint)

    async def error(fn: Any, **kw: Any) -> tuple[str, str]:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            await sqs.call(fn, **kw)
        return e.value.response["Error"]["Code"], e.value.response["Error"]["Message"]

    url = (await sqs.call(c.create_queue, QueueName="qw", Attributes={"DelaySeconds": "1"}))[
        "QueueUrl"
    ]
    assert await error(c.create_queue, QueueName="qw", Attributes={"DelaySeconds": "2"}) == (
        "QueueAlreadyExists",
        "A queue already exists with the same name and a different value for attribute "
        "DelaySeconds",
    )
    assert await error(c.delete_message, QueueUrl=url, ReceiptHandle="bogus") == (
        "ReceiptHandleIsInvalid",
        'The input receipt handle "bogus" is not a valid receipt handle.',
    )
    assert await error(c.delete_message_batch, QueueUrl=url, Entries=[]) == (
        "AWS.SimpleQueueService.EmptyBatchRequest",
        "There should be at least one DeleteMessageBatchRequestEntry in the request.",
    )
    # a body over the listener's limit: SQS's error in the XML envelope, the connection kept
    big = "q" * (3 * 1024 * 1024)
    assert await error(c.send_message, QueueUrl=url, MessageBody=big) == (
        "InvalidParameterValue",
        "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.",
    )
    code, _ = await error(
        c.send_message_batch, QueueUrl=url, Entries=[{"Id": "a", "MessageBody": big}]
    )
    assert code == "AWS.SimpleQueueService.BatchRequestTooLong"
    await sqs.call(c.send_message, QueueUrl=url, MessageBody="small")


async def test_refusals_and_attribute_picks_answer_over_query_as_over_json(sqs: SqsDaemon) -> None:
    """Batch failures, request-level refusals, tags and permissions, receipt handles and
    attribute selection answer over the Query protocol as over JSON: the query codes and
    SQS's texts, ``SenderFault`` in each failed entry."""
    c = query_client(sqs.endpoint)
    call = sqs.call

    async def error(fn: Any, **kw: Any) -> tuple[str, str, str]:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            await call(fn, **kw)
        err = e.value.response["Error"]
        return err["Code"], err["Message"], err["Type"]

    created = await call(c.create_queue, QueueName="q29", Attributes={"MaximumMessageSize": "1024"})
    url = created["QueueUrl"]
    # per-entry problems are that entry's Failed record; the others are sent
    out = await call(
        c.send_message_batch,
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "fine"},
            {"Id": "late", "MessageBody": "x", "DelaySeconds": 901},
            {"Id": "big", "MessageBody": "b" * 1025},
            {
                "Id": "type",
                "MessageBody": "x",
                "MessageAttributes": {"a": {"DataType": "Text", "StringValue": "v"}},
            },
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
        "type": (
            "InvalidParameterValue",
            "The type of message (user) attribute 'a' is invalid. You must use only the "
            "following supported type prefixes: Binary, Number, String.",
            True,
        ),
    }
    # request-level problems fail the call
    eleven = [{"Id": f"e{i}", "MessageBody": "x"} for i in range(11)]
    assert await error(c.send_message_batch, QueueUrl=url, Entries=eleven) == (
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        "Maximum number of entries per request are 10. You have sent 11.",
        "Sender",
    )
    assert await error(c.send_message_batch, QueueUrl=url, Entries=eleven[:1] * 2) == (
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        "Id e0 repeated.",
        "Sender",
    )
    assert await error(c.change_message_visibility_batch, QueueUrl=url, Entries=[]) == (
        "AWS.SimpleQueueService.EmptyBatchRequest",
        "There should be at least one ChangeMessageVisibilityBatchRequestEntry in the request.",
        "Sender",
    )
    fifo = (await call(c.create_queue, QueueName="q29.fifo", Attributes={"FifoQueue": "true"}))[
        "QueueUrl"
    ]
    good = {"Id": "g", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d"}
    assert await error(
        c.send_message_batch,
        QueueUrl=fifo,
        Entries=[good, {"Id": "n", "MessageBody": "y", "MessageDeduplicationId": "e"}],
    ) == ("MissingParameter", "The request must contain the parameter MessageGroupId.", "Sender")
    assert await error(
        c.send_message_batch,
        QueueUrl=fifo,
        Entries=[good, {"Id": "n", "MessageBody": "y", "MessageGroupId": "g"}],
    ) == (
        "InvalidParameterValue",
        "The queue should either have ContentBasedDeduplication enabled or "
        "MessageDeduplicationId provided explicitly",
        "Sender",
    )
    assert await error(c.send_message, QueueUrl=fifo, MessageBody="x") == (
        "MissingParameter",
        "The request must contain the parameter MessageGroupId.",
        "Sender",
    )
    # receipt handles, on visibility changes too
    text = 'The input receipt handle "bogus" is not a valid receipt handle.'
    assert await error(
        c.change_message_visibility, QueueUrl=url, ReceiptHandle="bogus", VisibilityTimeout=5
    ) == ("ReceiptHandleIsInvalid", text, "Sender")
    out = await call(
        c.change_message_visibility_batch,
        QueueUrl=url,
        Entries=[{"Id": "b", "ReceiptHandle": "bogus", "VisibilityTimeout": 5}],
    )
    assert out["Failed"] == [
        {"Id": "b", "SenderFault": True, "Code": "ReceiptHandleIsInvalid", "Message": text}
    ]
    # tags and permissions
    assert await error(c.tag_queue, QueueUrl=url, Tags={}) == (
        "MissingParameter",
        "The request must contain the parameter Tags.",
        "Sender",
    )
    assert await error(c.untag_queue, QueueUrl=url, TagKeys=[]) == (
        "InvalidParameterValue",
        "Tag keys must be between 1 and 128 characters in length.",
        "Sender",
    )
    await call(c.tag_queue, QueueUrl=url, Tags={f"k{i}": "v" for i in range(50)})
    assert await error(c.tag_queue, QueueUrl=url, Tags={"one-more": "v"}) == (
        "InvalidParameterValue",
        "Too many tags added for queue q29.",
        "Sender",
    )
    assert await error(
        c.add_permission,
        QueueUrl=url,
        Label="l",
        AWSAccountIds=["111122223333"],
        Actions=["Frobnicate"],
    ) == (
        "InvalidParameterValue",
        "Value SQS:Frobnicate for parameter ActionName is invalid. Reason: Please refer to the "
        "appropriate WSDL for a list of valid actions.",
        "Sender",
    )
    assert await error(
        c.add_permission, QueueUrl=url, Label="l", AWSAccountIds=["nope"], Actions=["SendMessage"]
    ) == (
        "InvalidParameterValue",
        "Value [nope] for parameter PrincipalId is invalid. Reason: Unable to verify.",
        "Sender",
    )
    assert await error(c.remove_permission, QueueUrl=url, Label="never") == (
        "InvalidParameterValue",
        "Value never for parameter Label is invalid. Reason: can't find label.",
        "Sender",
    )
    await call(
        c.add_permission,
        QueueUrl=url,
        Label="one",
        AWSAccountIds=["111122223333"],
        Actions=["SendMessage"],
    )
    policy = (await call(c.get_queue_attributes, QueueUrl=url, AttributeNames=["Policy"]))[
        "Attributes"
    ]["Policy"]
    assert '"Action":"SQS:SendMessage"' in policy.replace(" ", "")
    # attribute selection: prefixes pick message attributes, system names system ones
    mine = {
        "Custom.one": {"DataType": "String", "StringValue": "1"},
        "SentTimestamp": {"DataType": "String", "StringValue": "mine"},
        "other": {"DataType": "String", "StringValue": "o"},
    }
    await call(c.send_message, QueueUrl=url, MessageBody="sel", MessageAttributes=mine)
    got = await call(
        c.receive_message,
        QueueUrl=url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["Custom.*", "SentTimestamp"],
        AttributeNames=["ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount"],
    )
    by_body = {m["Body"]: m for m in got["Messages"]}
    m = by_body["sel"]
    assert m["MessageAttributes"] == {k: mine[k] for k in ("Custom.one", "SentTimestamp")}
    assert set(m["Attributes"]) == {"ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount"}
    assert m["Attributes"]["ApproximateFirstReceiveTimestamp"].isdigit()  # epoch ms
    assert len(m["Attributes"]["ApproximateFirstReceiveTimestamp"]) == 13
