"""What SQS keeps for a queue beyond ocd's settings, over a real boto3 client: tags,
permissions in ``Policy``, ``RedriveAllowPolicy``, and the attributes ocd enforces
(``MaximumMessageSize``, ``ReceiveMessageWaitTimeSeconds``), kept across a restart."""

from __future__ import annotations

import json

import aiohttp
import botocore.exceptions
import pytest

from tests.integration.sqs import SqsDaemon, start

pytestmark = pytest.mark.timeout(60)


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


async def _attrs(s: SqsDaemon, url: str, *names: str) -> dict[str, str]:
    out = await s.call(s.sqs.get_queue_attributes, QueueUrl=url, AttributeNames=list(names))
    return dict(out.get("Attributes", {}))


async def test_tags_are_set_listed_removed_and_kept_across_a_restart(
    tmp_path, store_section, session
) -> None:
    d = await start(tmp_path, store_section, session)
    try:
        c = d.sqs
        url = (await d.call(c.create_queue, QueueName="tagged", tags={"team": "ops"}))["QueueUrl"]
        await d.call(c.tag_queue, QueueUrl=url, Tags={"env": "dev", "team": "core"})
        assert (await d.call(c.list_queue_tags, QueueUrl=url))["Tags"] == {
            "team": "core",
            "env": "dev",
        }
        await d.call(c.untag_queue, QueueUrl=url, TagKeys=["team", "absent"])
        with pytest.raises(botocore.exceptions.ClientError) as e:
            await d.call(c.tag_queue, QueueUrl=url, Tags={"aws:x": "y"})
        assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    finally:
        await d.daemon.shutdown(timeout_s=1)
    d = await start(tmp_path, store_section, session)
    try:
        assert (await d.call(d.sqs.list_queue_tags, QueueUrl=url))["Tags"] == {"env": "dev"}
        other = (await d.call(d.sqs.create_queue, QueueName="untagged"))["QueueUrl"]
        assert "Tags" not in await d.call(d.sqs.list_queue_tags, QueueUrl=other)
    finally:
        await d.daemon.shutdown(timeout_s=1)


async def test_permissions_are_statements_of_the_policy_attribute(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = (await sqs.call(c.create_queue, QueueName="shared"))["QueueUrl"]
    assert "Policy" not in await _attrs(sqs, url, "All")
    await sqs.call(
        c.add_permission,
        QueueUrl=url,
        Label="send-from-b",
        AWSAccountIds=["111122223333"],
        Actions=["SendMessage", "ReceiveMessage"],
    )
    policy = json.loads((await _attrs(sqs, url, "Policy"))["Policy"])
    (st,) = policy["Statement"]
    assert st["Sid"] == "send-from-b" and st["Effect"] == "Allow"
    assert st["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    assert st["Action"] == ["SQS:SendMessage", "SQS:ReceiveMessage"]
    assert st["Resource"] == "arn:aws:sqs:us-east-1:000000000000:shared"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(
            c.add_permission, QueueUrl=url, Label="send-from-b",
            AWSAccountIds=["111122223333"], Actions=["SendMessage"],
        )  # fmt: skip
    assert "Already exists" in e.value.response["Error"]["Message"]
    await sqs.call(c.remove_permission, QueueUrl=url, Label="send-from-b")
    assert "Policy" not in await _attrs(sqs, url, "All")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.remove_permission, QueueUrl=url, Label="send-from-b")
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"


def _error(e: pytest.ExceptionInfo[botocore.exceptions.ClientError]) -> tuple[str, str]:
    err = e.value.response["Error"]
    return err["Code"], err["Message"]


async def test_tag_and_permission_refusals_are_sqss(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    url = (await sqs.call(c.create_queue, QueueName="picky"))["QueueUrl"]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.tag_queue, QueueUrl=url, Tags={})
    assert _error(e) == ("MissingParameter", "The request must contain the parameter Tags.")
    await sqs.call(c.tag_queue, QueueUrl=url, Tags={f"k{i}": "v" for i in range(50)})
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.tag_queue, QueueUrl=url, Tags={"one-more": "v"})
    assert _error(e) == ("InvalidParameterValue", "Too many tags added for queue picky.")
    assert len((await sqs.call(c.list_queue_tags, QueueUrl=url))["Tags"]) == 50
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.untag_queue, QueueUrl=url, TagKeys=[])
    assert _error(e) == (
        "InvalidParameterValue",
        "Tag keys must be between 1 and 128 characters in length.",
    )

    async def add(accounts: list[str], actions: list[str]) -> tuple[str, str]:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            await sqs.call(
                c.add_permission, QueueUrl=url, Label="l", AWSAccountIds=accounts, Actions=actions
            )
        return _error(e)

    assert await add(["111122223333"], ["CreateQueue"]) == (
        "InvalidParameterValue",
        "Value SQS:CreateQueue for parameter ActionName is invalid. Reason: Only the queue "
        "owner is allowed to invoke this action.",
    )
    assert await add(["111122223333"], ["Frobnicate"]) == (
        "InvalidParameterValue",
        "Value SQS:Frobnicate for parameter ActionName is invalid. Reason: Please refer to the "
        "appropriate WSDL for a list of valid actions.",
    )
    assert await add(["not-an-id"], ["SendMessage"]) == (
        "InvalidParameterValue",
        "Value [not-an-id] for parameter PrincipalId is invalid. Reason: Unable to verify.",
    )
    assert await add(["111122223333"], ["SendMessage"] * 8) == (
        "OverLimit",
        "8 Actions were found, maximum allowed is 7.",
    )
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.remove_permission, QueueUrl=url, Label="never")
    assert _error(e) == (
        "InvalidParameterValue",
        "Value never for parameter Label is invalid. Reason: can't find label.",
    )
    # one action (and one account) is written as a string, as SQS writes it
    await sqs.call(
        c.add_permission,
        QueueUrl=url,
        Label="one",
        AWSAccountIds=["111122223333", "444455556666"],
        Actions=["SendMessage"],
    )
    policy = json.loads((await _attrs(sqs, url, "Policy"))["Policy"])
    assert policy["Version"] == "2008-10-17"
    (st,) = policy["Statement"]
    assert st["Action"] == "SQS:SendMessage"
    assert st["Principal"] == {
        "AWS": ["arn:aws:iam::111122223333:root", "arn:aws:iam::444455556666:root"]
    }


async def test_unmapped_attributes_are_kept_and_shown(sqs: SqsDaemon) -> None:
    c = sqs.sqs
    allow = json.dumps({"redrivePermission": "denyAll"})
    policy = json.dumps({"Version": "2012-10-17", "Statement": []})
    url = (
        await sqs.call(
            c.create_queue,
            QueueName="kept",
            Attributes={"RedriveAllowPolicy": allow, "MaximumMessageSize": "2048"},
        )
    )["QueueUrl"]
    await sqs.call(
        c.set_queue_attributes,
        QueueUrl=url,
        Attributes={"Policy": policy, "KmsMasterKeyId": "alias/x", "SqsManagedSseEnabled": "true"},
    )
    got = await _attrs(sqs, url, "All")
    assert json.loads(got["RedriveAllowPolicy"]) == {"redrivePermission": "denyAll"}
    assert json.loads(got["Policy"]) == json.loads(policy)
    assert (got["MaximumMessageSize"], got["KmsMasterKeyId"]) == ("2048", "alias/x")
    assert (got["SqsManagedSseEnabled"], got["ReceiveMessageWaitTimeSeconds"]) == ("true", "0")
    with pytest.raises(c.exceptions.InvalidAttributeValue):
        await sqs.call(
            c.set_queue_attributes, QueueUrl=url, Attributes={"RedriveAllowPolicy": "{}"}
        )
    with pytest.raises(c.exceptions.InvalidAttributeValue):
        await sqs.call(
            c.set_queue_attributes, QueueUrl=url, Attributes={"MaximumMessageSize": "100"}
        )
    # CreateQueue again: the same kept attributes give the URL, others QueueNameExists
    same = {"RedriveAllowPolicy": allow, "MaximumMessageSize": "2048"}
    assert (await sqs.call(c.create_queue, QueueName="kept", Attributes=same))["QueueUrl"] == url
    with pytest.raises(c.exceptions.QueueNameExists):
        await sqs.call(c.create_queue, QueueName="kept", Attributes={"MaximumMessageSize": "4096"})
    # the queue's MaximumMessageSize is enforced on sends
    await sqs.call(c.send_message, QueueUrl=url, MessageBody="x" * 2048)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.send_message, QueueUrl=url, MessageBody="x" * 2049)
    assert "shorter than 2048 bytes" in e.value.response["Error"]["Message"]
    await sqs.call(c.set_queue_attributes, QueueUrl=url, Attributes={"Policy": ""})
    assert "Policy" not in await _attrs(sqs, url, "All")


async def test_receive_message_wait_time_seconds_is_the_default_long_poll(
    sqs: SqsDaemon,
) -> None:
    c = sqs.sqs
    url = (
        await sqs.call(
            c.create_queue, QueueName="waits", Attributes={"ReceiveMessageWaitTimeSeconds": "20"}
        )
    )["QueueUrl"]
    assert (await _attrs(sqs, url, "ReceiveMessageWaitTimeSeconds")) == {
        "ReceiveMessageWaitTimeSeconds": "20"
    }
    # a message delayed past the moment of the receive: only a long poll gets it
    await sqs.call(c.send_message, QueueUrl=url, MessageBody="late", DelaySeconds=1)
    out = await sqs.call(c.receive_message, QueueUrl=url)
    assert [m["Body"] for m in out["Messages"]] == ["late"]
    await sqs.call(c.send_message, QueueUrl=url, MessageBody="later", DelaySeconds=1)
    # an explicit WaitTimeSeconds=0 still answers at once
    out = await sqs.call(c.receive_message, QueueUrl=url, WaitTimeSeconds=0)
    assert "Messages" not in out


async def test_a_one_mebibyte_message_is_sent_and_received_whole(sqs: SqsDaemon) -> None:
    """SQS's limit is 1 MiB, far above the Workers binding's 128,000 bytes: a message that
    size goes through whole, a byte more is refused with SQS's own error."""
    c = sqs.sqs
    url = (await sqs.call(c.create_queue, QueueName="big"))["QueueUrl"]
    body = "b" * 1_048_576
    await sqs.call(c.send_message, QueueUrl=url, MessageBody=body)
    got = await sqs.call(c.receive_message, QueueUrl=url, WaitTimeSeconds=5)
    assert [m["Body"] for m in got["Messages"]] == [body]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.send_message, QueueUrl=url, MessageBody=body + "b")
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"


async def test_a_dead_letter_queues_redrive_allow_policy_decides_who_may_name_it(
    sqs: SqsDaemon,
) -> None:
    c = sqs.sqs

    async def queue(name: str, **attrs: str) -> str:
        return str((await sqs.call(c.create_queue, QueueName=name, Attributes=attrs))["QueueUrl"])

    def redrive(dlq: str) -> dict[str, str]:
        arn = f"arn:aws:sqs:us-east-1:000000000000:{dlq}"
        return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})}

    await queue("closed-dlq", RedriveAllowPolicy=json.dumps({"redrivePermission": "denyAll"}))
    only = {"redrivePermission": "byQueue",
            "sourceQueueArns": ["arn:aws:sqs:us-east-1:000000000000:chosen"]}  # fmt: skip
    await queue("picky-dlq", RedriveAllowPolicy=json.dumps(only))
    chosen, other = await queue("chosen"), await queue("other")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(c.set_queue_attributes, QueueUrl=chosen, Attributes=redrive("closed-dlq"))
    assert "RedriveAllowPolicy" in e.value.response["Error"]["Message"]
    with pytest.raises(botocore.exceptions.ClientError):
        await sqs.call(c.set_queue_attributes, QueueUrl=other, Attributes=redrive("picky-dlq"))
    await sqs.call(c.set_queue_attributes, QueueUrl=chosen, Attributes=redrive("picky-dlq"))
    got = await sqs.call(c.get_queue_attributes, QueueUrl=chosen, AttributeNames=["All"])
    assert "picky-dlq" in got["Attributes"]["RedrivePolicy"]
