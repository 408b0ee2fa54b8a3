"""Bad SQS requests are the sender's fault: a 4xx with SQS's own code, in the protocol's
own envelope (XML for the Query protocol, JSON for AWS JSON 1.0), never a 500."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import aiohttp
import pytest

from tests.integration.sqs import SqsDaemon, start

pytestmark = pytest.mark.timeout(60)
NS = {"s": "http://queue.amazonaws.com/doc/2012-11-05/"}
JSON_TYPE = "application/x-amz-json-1.0"


@pytest.fixture
async def sqs(tmp_path, store_section):
    session = aiohttp.ClientSession()
    d = await start(tmp_path, store_section, session)
    yield d
    await d.daemon.shutdown(timeout_s=1)
    await session.close()


async def query(sqs: SqsDaemon, form: dict[str, str]) -> tuple[int, str, str | None]:
    """(status, content type, the XML error code or None) of a Query-protocol POST."""
    async with sqs.session.post(sqs.endpoint + "/", data={"Version": "2012-11-05", **form}) as r:
        text = await r.text()
        code = None
        if r.status >= 400:
            assert r.content_type == "text/xml", (r.status, text)
            found = ET.fromstring(text).find("s:Error/s:Code", NS)
            assert found is not None, text
            code = found.text
        return r.status, r.content_type, code


async def json_call(sqs: SqsDaemon, op: str, body: bytes) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": JSON_TYPE, "X-Amz-Target": f"AmazonSQS.{op}"}
    async with sqs.session.post(sqs.endpoint + "/", data=body, headers=headers) as r:
        assert r.content_type == JSON_TYPE, await r.text()
        return r.status, json.loads(await r.read())


async def _queue_url(sqs: SqsDaemon) -> str:
    out = await sqs.call(sqs.sqs.create_queue, QueueName="q")
    return str(out["QueueUrl"])


@pytest.mark.parametrize(
    "action, key",
    [
        ("TagQueue", "Tag.1.Key.x"),
        ("TagQueue", "Tag.1.Value.x"),
        ("SetQueueAttributes", "Attribute.1.Name.x"),
        ("SendMessage", "MessageAttribute.1.Name.x"),
        ("GetQueueAttributes", "AttributeName.1.x"),
        ("ReceiveMessage", "AttributeName.1.x"),
        ("ReceiveMessage", "MessageAttributeName.1.x"),
        ("SendMessageBatch", "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name.x"),
        ("SendMessage", "MessageAttribute.1.Value.StringValue.x"),
    ],
)
async def test_a_query_key_one_level_too_deep_is_a_sender_error_in_xml(
    sqs: SqsDaemon, action: str, key: str
) -> None:
    url = await _queue_url(sqs)
    form = {
        "Action": action,
        "QueueUrl": url,
        "MessageBody": "hi",
        "SendMessageBatchRequestEntry.1.Id": "a",
        "SendMessageBatchRequestEntry.1.MessageBody": "hi",
        key: "String",
    }
    status, _, code = await query(sqs, form)
    assert status == 400
    assert code in ("InvalidParameterValue", "MalformedQueryString")


@pytest.mark.parametrize("member", ["AttributeNames", "MessageSystemAttributeNames"])
@pytest.mark.parametrize("value", [[["All"]], [{"a": 1}], "All", 5, {"All": 1}, [None]])
async def test_receive_attribute_names_that_are_not_a_list_of_strings_are_refused(
    sqs: SqsDaemon, member: str, value: Any
) -> None:
    url = await _queue_url(sqs)
    body = json.dumps({"QueueUrl": url, member: value}).encode()
    status, out = await json_call(sqs, "ReceiveMessage", body)
    assert status == 400, out
    assert out["__type"] == "com.amazon.coral.service#InvalidParameterValueException"


@pytest.mark.parametrize("depth", [1000, 100_000])
async def test_a_deeply_nested_json_body_is_a_serialization_error(
    sqs: SqsDaemon, depth: int
) -> None:
    body = b'{"QueueName":' + b"[" * depth + b"]" * depth + b"}"
    status, out = await json_call(sqs, "CreateQueue", body)
    assert status == 400, out
    assert out["__type"] == "com.amazon.coral.service#SerializationException"


@pytest.mark.parametrize("body", [b"{", b"\xff\xfe{}", b"[]", b'"s"', b"null"])
async def test_a_body_that_is_no_json_object_is_a_serialization_error(
    sqs: SqsDaemon, body: bytes
) -> None:
    status, out = await json_call(sqs, "ListQueues", body)
    assert status == 400, out
    assert out["__type"] == "com.amazon.coral.service#SerializationException"


@pytest.mark.parametrize("max_results", ["5", 5.5, True, [5], {"n": 5}])
async def test_list_queues_max_results_must_be_an_integer(sqs: SqsDaemon, max_results: Any) -> None:
    await _queue_url(sqs)
    status, out = await json_call(
        sqs, "ListQueues", json.dumps({"MaxResults": max_results}).encode()
    )
    assert status == 400, out
    assert out["__type"] == "com.amazon.coral.service#InvalidParameterValueException"


@pytest.mark.parametrize("token", ["garbage", "AAAA", "eyJ0b2tlbiI6MX0=", "!!", "cQ"])
@pytest.mark.parametrize("op", ["ListQueues", "ListDeadLetterSourceQueues"])
async def test_a_next_token_this_endpoint_did_not_issue_is_refused(
    sqs: SqsDaemon, op: str, token: str
) -> None:
    url = await _queue_url(sqs)
    body = {"NextToken": token, "MaxResults": 1, "QueueUrl": url}
    status, out = await json_call(sqs, op, json.dumps(body).encode())
    assert status == 400, out
    assert out["__type"] == "com.amazon.coral.service#InvalidParameterValueException"
    status, _, code = await query(sqs, {"Action": op, **{k: str(v) for k, v in body.items()}})
    assert (status, code) == (400, "InvalidParameterValue")


async def test_a_next_token_pages_through_every_queue(sqs: SqsDaemon) -> None:
    for name in ("pa", "pb", "pc"):
        await sqs.call(sqs.sqs.create_queue, QueueName=name)
    seen: list[str] = []
    kwargs: dict[str, Any] = {"MaxResults": 2, "QueueNamePrefix": "p"}
    while True:
        out = await sqs.call(sqs.sqs.list_queues, **kwargs)
        seen += [u.rsplit("/", 1)[1] for u in out["QueueUrls"]]
        if "NextToken" not in out:
            break
        kwargs["NextToken"] = out["NextToken"]
    assert seen == ["pa", "pb", "pc"]


@pytest.mark.parametrize("bad", ["\x00", "\x1b[0m", "\x01"])
async def test_an_error_echoing_characters_xml_cannot_carry_still_parses(
    sqs: SqsDaemon, bad: str
) -> None:
    url = await _queue_url(sqs)
    form = {"Action": "ReceiveMessage", "QueueUrl": url, "MaxNumberOfMessages": f"1{bad}"}
    status, _, code = await query(sqs, form)  # parses the XML
    assert (status, code) == (400, "InvalidParameterValue")


@pytest.mark.parametrize("name", ["\x00", "\ud800", "a\x00b", "x" * 81])
@pytest.mark.parametrize(
    "op, member, prefix, error",
    [
        ("GetQueueAttributes", "QueueUrl", "", "QueueDoesNotExist"),
        ("SendMessage", "QueueUrl", "http://h/000000000000/", "QueueDoesNotExist"),
        ("GetQueueUrl", "QueueName", "", "QueueDoesNotExist"),
        (
            "ListMessageMoveTasks",
            "SourceArn",
            "arn:aws:sqs:us-east-1:000000000000:",
            "ResourceNotFoundException",
        ),
    ],
)
async def test_a_name_no_queue_can_have_names_no_queue(
    sqs: SqsDaemon, name: str, op: str, member: str, prefix: str, error: str
) -> None:
    """Not a store error either: PostgreSQL takes no NUL and no lone surrogate."""
    body = {member: prefix + name, "MessageBody": "hi"}
    status, out = await json_call(sqs, op, json.dumps(body).encode())
    assert out["__type"].endswith(f"#{error}"), out
    assert status in (400, 404)
