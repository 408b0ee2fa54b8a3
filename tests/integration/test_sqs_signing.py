"""SigV4 and accounts on the SQS endpoint, with real signing boto3 clients against an
in-process daemon whose [[accounts]] list SQS key pairs."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import aiohttp
import boto3
import botocore.exceptions
import botocore.session
import pytest
from botocore.config import Config

from ocd.config import load_config
from ocd.daemon import Daemon, load_workers
from tests.integration.sqs import SqsDaemon
from tests.integration.test_sqs_query import MODELS, NS

pytestmark = pytest.mark.timeout(60)
ACME = ("AKIAACMEKEY000001", "acme-secret")
BETA = ("AKIABETAKEY000001", "beta-secret")


def signed_client(
    endpoint: str, key: tuple[str, str], query: bool = False, region: str = "us-east-1"
) -> Any:
    session = botocore.session.get_session()
    if query:
        session.get_component("data_loader").search_paths.insert(0, str(MODELS))
    return boto3.session.Session(botocore_session=session).client(
        "sqs",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        config=Config(retries={"max_attempts": 1}),
    )


@pytest.fixture
async def sqs(tmp_path: Path, store_section: str):
    (tmp_path / "beta.secret").write_text(BETA[1] + "\n")
    (tmp_path / "beta.secret").chmod(0o600)
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

[sqs]
listen = "127.0.0.1:0"
region = "us-east-1"

{store_section}

[[accounts]]
id = "acme"
token_sha256 = ["{hashlib.sha256(b"acme-token").hexdigest()}"]
sqs_account_id = "111122223333"
sqs_keys = [{{ access_key_id = "{ACME[0]}", secret_env = "ACME_SQS_SECRET" }}]

[[accounts]]
id = "beta"
token_sha256 = ["{hashlib.sha256(b"beta-token").hexdigest()}"]
sqs_account_id = "444455556666"
sqs_keys = [{{ access_key_id = "{BETA[0]}", secret_file = "beta.secret" }}]
"""
    )
    config = load_config(cfg, {"ACME_SQS_SECRET": ACME[1]})
    daemon = Daemon(config, load_workers(config))
    await daemon.start()
    session = aiohttp.ClientSession()
    d = SqsDaemon(daemon, tmp_path / "record.jsonl", session)
    yield d
    await daemon.shutdown(timeout_s=1)
    await session.close()


async def test_each_account_sees_only_its_own_queues(sqs: SqsDaemon) -> None:
    acme = signed_client(sqs.endpoint, ACME)
    beta = signed_client(sqs.endpoint, BETA)
    a_url = (await sqs.call(acme.create_queue, QueueName="jobs"))["QueueUrl"]
    assert a_url == f"{sqs.endpoint}/111122223333/jobs"
    await sqs.call(acme.create_queue, QueueName="acme-only")
    b_url = (await sqs.call(beta.create_queue, QueueName="jobs"))["QueueUrl"]
    assert b_url == f"{sqs.endpoint}/444455556666/jobs"
    # the queues live in ocd's accounts of the same names, as the REST API shows them
    assert sqs.daemon.store.queue("jobs", "acme") is not None
    assert sqs.daemon.store.queue("jobs", "beta") is not None
    assert sqs.daemon.store.queue("acme-only", "beta") is None
    await sqs.call(acme.send_message, QueueUrl=a_url, MessageBody="for acme")
    # beta cannot find, read or write acme's queue: it does not exist for beta
    with pytest.raises(beta.exceptions.QueueDoesNotExist):
        await sqs.call(beta.get_queue_url, QueueName="acme-only")
    with pytest.raises(beta.exceptions.QueueDoesNotExist):
        await sqs.call(beta.get_queue_url, QueueName="jobs", QueueOwnerAWSAccountId="111122223333")
    with pytest.raises(beta.exceptions.QueueDoesNotExist):
        await sqs.call(beta.send_message, QueueUrl=a_url, MessageBody="x")
    with pytest.raises(beta.exceptions.QueueDoesNotExist):
        await sqs.call(beta.receive_message, QueueUrl=a_url)
    assert (await sqs.call(beta.list_queues))["QueueUrls"] == [b_url]
    assert "Messages" not in await sqs.call(beta.receive_message, QueueUrl=b_url)
    got = await sqs.call(acme.receive_message, QueueUrl=a_url, MessageSystemAttributeNames=["All"])
    (m,) = got["Messages"]
    assert m["Body"] == "for acme" and m["Attributes"]["SenderId"] == "111122223333"
    attrs = await sqs.call(acme.get_queue_attributes, QueueUrl=a_url, AttributeNames=["QueueArn"])
    assert attrs["Attributes"]["QueueArn"] == "arn:aws:sqs:us-east-1:111122223333:jobs"


async def test_an_accounts_queues_of_another_region_are_kept_apart(sqs: SqsDaemon) -> None:
    east = signed_client(sqs.endpoint, ACME)
    west = signed_client(sqs.endpoint, ACME, region="eu-west-1")
    url = (await sqs.call(west.create_queue, QueueName="jobs"))["QueueUrl"]
    assert url == f"{sqs.endpoint}/111122223333/jobs"
    attrs = await sqs.call(west.get_queue_attributes, QueueUrl=url, AttributeNames=["QueueArn"])
    # the region comes from the signature's credential scope
    assert attrs["Attributes"]["QueueArn"] == "arn:aws:sqs:eu-west-1:111122223333:jobs"
    with pytest.raises(east.exceptions.QueueDoesNotExist):
        await sqs.call(east.get_queue_url, QueueName="jobs")
    # acme's own account (the REST API's) holds its default region's queues only
    assert sqs.daemon.store.queue("jobs", "acme") is None
    assert sqs.daemon.store.queue("jobs", "acme@eu-west-1") is not None
    headers = {"Authorization": "Bearer acme-token"}
    async with sqs.session.get(
        f"http://127.0.0.1:{sqs.daemon.port}/client/v4/accounts/acme/queues", headers=headers
    ) as r:
        assert r.status == 200 and (await r.json())["result"] == []
    # nor does another account's key reach it in that region
    beta = signed_client(sqs.endpoint, BETA, region="eu-west-1")
    with pytest.raises(beta.exceptions.QueueDoesNotExist):
        await sqs.call(beta.send_message, QueueUrl=url, MessageBody="x")


async def test_bad_credentials_are_refused_with_sqs_codes(sqs: SqsDaemon) -> None:
    cases = [
        (signed_client(sqs.endpoint, (ACME[0], "wrong")), "SignatureDoesNotMatch", 403),
        (signed_client(sqs.endpoint, ("AKIAUNKNOWNKEY001", "x")), "InvalidClientTokenId", 403),
        # beta's key signing for... beta: fine; acme's key id with beta's secret: refused
        (signed_client(sqs.endpoint, (ACME[0], BETA[1])), "SignatureDoesNotMatch", 403),
    ]
    for client, code, status in cases:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            await sqs.call(client.list_queues)
        assert e.value.response["Error"]["Code"] == code
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    unsigned = boto3.session.Session().client(
        "sqs",
        endpoint_url=sqs.endpoint,
        region_name="us-east-1",
        config=Config(signature_version=botocore.UNSIGNED, retries={"max_attempts": 1}),
    )
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(unsigned.list_queues)
    assert e.value.response["Error"]["Code"] == "AccessDenied"


async def test_query_protocol_signed_and_presigned(sqs: SqsDaemon) -> None:
    acme = signed_client(sqs.endpoint, ACME, query=True)
    assert acme.meta.service_model.protocol == "query"
    url = (await sqs.call(acme.create_queue, QueueName="q"))["QueueUrl"]
    assert url.endswith("/111122223333/q")
    presigned = acme.generate_presigned_url(
        "list_queues", Params={"QueueNamePrefix": "q"}, ExpiresIn=300, HttpMethod="GET"
    )
    async with sqs.session.get(presigned) as r:
        assert r.status == 200, await r.text()
        root = ET.fromstring(await r.text())
    assert root.findtext("s:ListQueuesResult/s:QueueUrl", namespaces=NS) == url
    # the same URL with its signature changed is refused
    forged = presigned.replace("QueueNamePrefix=q", "QueueNamePrefix=x")
    async with sqs.session.get(forged) as r:
        assert r.status == 403
        root = ET.fromstring(await r.text())
    assert root.findtext("s:Error/s:Code", namespaces=NS) == "SignatureDoesNotMatch"


async def test_a_key_removed_by_a_reload_is_refused_at_once(
    sqs: SqsDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    beta = signed_client(sqs.endpoint, BETA)
    await sqs.call(beta.list_queues)
    monkeypatch.setenv("ACME_SQS_SECRET", ACME[1])  # a reload reads the process environment
    cfg = tmp_path / "ocd.toml"
    text = cfg.read_text()
    cut = text.index('sqs_keys = [{ access_key_id = "AKIABETA')
    cfg.write_text(text[:cut])  # beta keeps its account, loses its SQS key
    assert await sqs.daemon.reload()
    with pytest.raises(botocore.exceptions.ClientError) as e:
        await sqs.call(beta.list_queues)
    assert e.value.response["Error"]["Code"] == "InvalidClientTokenId"
    await sqs.call(signed_client(sqs.endpoint, ACME).list_queues)
