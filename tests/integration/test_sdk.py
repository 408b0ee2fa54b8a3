"""Cloudflare's official Python SDK (``cloudflare``) against a real ocd daemon on 127.0.0.1.

The SDK is synchronous (httpx), so each call runs in a thread while the daemon serves on
the test's event loop.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import cloudflare
import pytest
from cloudflare import Cloudflare

from tests.integration.rest import accounts_toml

T = TypeVar("T")
ACCOUNT = "acme"
TOKEN = "sdk-secret-token"


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(fn, *args, **kwargs)


def sdk(base_url: str, token: str = TOKEN) -> Cloudflare:
    return Cloudflare(api_token=token, base_url=base_url, max_retries=0, timeout=10)


@pytest.fixture
async def cf(start_daemon) -> AsyncIterator[Cloudflare]:
    d = await start_daemon(
        worker_extra=f'account = "{ACCOUNT}"', queues=accounts_toml({ACCOUNT: TOKEN})
    )
    with sdk(f"{d.base}/client/v4") as client:
        yield client


def is_id(value: object) -> bool:
    return isinstance(value, str) and len(value) == 32 and int(value, 16) >= 0 and value.islower()


async def test_queue_lifecycle(cf: Cloudflare) -> None:
    q = cf.queues
    created = await run(
        q.create,
        account_id=ACCOUNT,
        queue_name="orders",
        extra_body={"settings": {"delivery_delay": 5, "message_retention_period": 3600}},
    )
    assert created is not None and created.queue_name == "orders" and is_id(created.queue_id)
    assert created.settings is not None
    assert created.settings.delivery_delay == 5
    assert created.settings.message_retention_period == 3600
    assert created.settings.delivery_paused is False
    assert created.consumers == [] and created.producers == []
    qid = created.queue_id
    assert qid is not None

    listed = await run(q.list, account_id=ACCOUNT)
    names = {x.queue_name: x for x in listed}
    assert set(names) == {"orders", "jobs"}  # "jobs" comes from the config file
    jobs = names["jobs"]
    assert jobs.producers is not None and jobs.producers[0].script == "app"  # type: ignore[union-attr]

    got = await run(q.get, qid, account_id=ACCOUNT)
    assert got is not None and got.queue_id == qid and got.settings == created.settings

    # PUT replaces the settings: what it leaves out goes back to the default
    put = await run(q.update, qid, account_id=ACCOUNT, settings={"delivery_delay": 2})
    assert put is not None and put.settings is not None
    assert put.settings.delivery_delay == 2
    assert put.settings.message_retention_period == 345_600

    # PATCH changes only what it names
    patched = await run(q.edit, qid, account_id=ACCOUNT, settings={"delivery_paused": True})
    assert patched is not None and patched.settings is not None
    assert patched.settings.delivery_paused is True and patched.settings.delivery_delay == 2
    assert patched.modified_on is not None and created.created_on is not None
    assert patched.modified_on >= created.created_on

    metrics = await run(q.get_metrics, qid, account_id=ACCOUNT)
    assert metrics is not None
    assert (metrics.backlog_count, metrics.backlog_bytes) == (0, 0)
    assert metrics.oldest_message_timestamp_ms == 0

    deleted = await run(q.delete, qid, account_id=ACCOUNT)
    assert deleted.success is True
    with pytest.raises(cloudflare.NotFoundError):
        await run(q.get, qid, account_id=ACCOUNT)
    assert [x.queue_name for x in await run(q.list, account_id=ACCOUNT)] == ["jobs"]


async def test_pull_consumer_lifecycle(cf: Cloudflare) -> None:
    queue = await run(cf.queues.create, account_id=ACCOUNT, queue_name="work")
    assert queue is not None and queue.queue_id is not None
    qid = queue.queue_id
    c = cf.queues.consumers
    settings = {"batch_size": 7, "max_retries": 2, "visibility_timeout_ms": 5000, "retry_delay": 1}
    created = await run(
        c.create,
        qid,
        account_id=ACCOUNT,
        type="http_pull",
        dead_letter_queue="work-dlq",
        settings=settings,  # type: ignore[arg-type]
    )
    assert created is not None and created.type == "http_pull" and is_id(created.consumer_id)
    assert created.queue_name == "work" and created.dead_letter_queue == "work-dlq"
    assert created.settings is not None
    assert created.settings.model_dump(exclude_none=True) == settings
    assert isinstance(created.created_on, dt.datetime)
    cid = created.consumer_id
    assert cid is not None

    # the dead-letter queue did not exist: like Cloudflare, ocd created it
    dlq = await run(cf.queues.get, "work-dlq", account_id=ACCOUNT)
    assert dlq is not None and dlq.queue_name == "work-dlq"

    listed = await run(c.list, qid, account_id=ACCOUNT)
    assert [x.consumer_id for x in listed] == [cid]
    got = await run(c.get, cid, account_id=ACCOUNT, queue_id=qid)
    assert got == created
    on_queue = await run(cf.queues.get, qid, account_id=ACCOUNT)
    assert on_queue is not None and on_queue.consumers_total_count == 1

    updated = await run(
        c.update,
        cid,
        account_id=ACCOUNT,
        queue_id=qid,
        type="http_pull",
        settings={"batch_size": 3, "visibility_timeout_ms": 1000},
    )
    assert updated is not None and updated.consumer_id == cid
    assert updated.settings is not None
    assert (updated.settings.batch_size, updated.settings.visibility_timeout_ms) == (3, 1000)
    assert updated.dead_letter_queue == ""  # PUT replaces: no DLQ named, none kept

    # a second consumer on the same queue is refused
    with pytest.raises(cloudflare.ConflictError):
        await run(c.create, qid, account_id=ACCOUNT, type="http_pull")

    deleted = await run(c.delete, cid, account_id=ACCOUNT, queue_id=qid)
    assert deleted.success is True
    assert list(await run(c.list, qid, account_id=ACCOUNT)) == []
    with pytest.raises(cloudflare.NotFoundError):
        await run(c.get, cid, account_id=ACCOUNT, queue_id=qid)


async def test_messages_push_pull_ack_peek_purge(cf: Cloudflare) -> None:
    queue = await run(cf.queues.create, account_id=ACCOUNT, queue_name="mail")
    assert queue is not None and queue.queue_id is not None
    qid = queue.queue_id
    await run(cf.queues.consumers.create, qid, account_id=ACCOUNT, type="http_pull")
    m = cf.queues.messages

    pushed = await run(m.push, qid, account_id=ACCOUNT, body={"to": "ada"})
    assert pushed is not None and pushed.metadata is not None
    assert pushed.metadata.metrics is not None and pushed.metadata.metrics.backlog_count == 1
    await run(m.push, qid, account_id=ACCOUNT, body="plain words", content_type="text")
    bulk = await run(
        m.bulk_push,
        qid,
        account_id=ACCOUNT,
        messages=[{"body": [1, 2]}, {"body": "x", "content_type": "text"}],  # type: ignore[list-item]
    )
    assert bulk is not None and bulk.metadata is not None and bulk.metadata.metrics is not None
    assert bulk.metadata.metrics.backlog_count == 4

    peeked = await run(m.peek, qid, account_id=ACCOUNT, batch_size=10)
    assert peeked is not None and peeked.messages is not None and len(peeked.messages) == 4
    bodies = {p.body: p for p in peeked.messages}
    json_body = base64.b64encode(json.dumps({"to": "ada"}, separators=(",", ":")).encode())
    assert set(bodies) == {
        json_body.decode(),
        "plain words",
        base64.b64encode(b"[1,2]").decode(),
        "x",
    }
    assert all(p.attempts == 0 and p.ref for p in peeked.messages)

    # purge one peeked message by its ref
    purged = await run(
        m.purge,
        qid,
        account_id=ACCOUNT,
        refs=[{"ref": bodies["x"].ref}],  # type: ignore[list-item]
    )
    assert purged is not None and not purged.warnings
    metrics = await run(cf.queues.get_metrics, qid, account_id=ACCOUNT)
    assert metrics is not None and metrics.backlog_count == 3

    pulled = await run(m.pull, qid, account_id=ACCOUNT, batch_size=10, visibility_timeout_ms=60_000)
    assert pulled is not None and pulled.messages is not None
    assert len(pulled.messages) == 3 and pulled.message_backlog_count == 3
    assert all(p.attempts == 1 and p.lease_id for p in pulled.messages)
    by_body = {p.body: p for p in pulled.messages}
    assert by_body["plain words"].metadata == {"CF-Content-Type": "text"}
    # leased: a second pull gets nothing
    again = await run(m.pull, qid, account_id=ACCOUNT, batch_size=10)
    assert again is not None and again.messages == []

    keep = by_body["plain words"]
    done = [p for p in pulled.messages if p is not keep]
    acked = await run(
        m.ack,
        qid,
        account_id=ACCOUNT,
        acks=[{"lease_id": p.lease_id} for p in done],  # type: ignore[misc]
        retries=[{"lease_id": keep.lease_id, "delay_seconds": 0}],  # type: ignore[list-item]
    )
    assert acked is not None and (acked.ack_count, acked.retry_count) == (2, 1)
    assert not acked.warnings

    retried = await run(m.pull, qid, account_id=ACCOUNT, batch_size=10)
    assert retried is not None and retried.messages is not None
    assert [(p.id, p.body, p.attempts) for p in retried.messages] == [(keep.id, "plain words", 2)]

    started = await run(
        cf.queues.purge.start, qid, account_id=ACCOUNT, delete_messages_permanently=True
    )
    assert started is not None and started.queue_name == "mail"
    metrics = await run(cf.queues.get_metrics, qid, account_id=ACCOUNT)
    assert metrics is not None and metrics.backlog_count == 0
    status = await run(cf.queues.purge.status, qid, account_id=ACCOUNT)
    assert status is not None and status.completed == "true"
    assert status.started_at is not None
    assert dt.datetime.fromisoformat(status.started_at).tzinfo is not None


async def test_errors_are_typed_and_carry_ocd_codes(cf: Cloudflare) -> None:
    with pytest.raises(cloudflare.NotFoundError) as missing:
        await run(cf.queues.get, "nope", account_id=ACCOUNT)
    assert _error(missing.value) == (11000, "Queue not found: nope")

    with sdk(str(cf.base_url), token="wrong") as bad:
        with pytest.raises(cloudflare.PermissionDeniedError) as denied:
            await run(bad.queues.list, account_id=ACCOUNT)
    assert _error(denied.value) == (10000, "Authentication error")

    with pytest.raises(cloudflare.BadRequestError) as invalid:
        await run(cf.queues.create, account_id=ACCOUNT, queue_name="no spaces allowed")
    code, message = _error(invalid.value)
    assert code == 10207 and "queue_name" in message

    with pytest.raises(cloudflare.BadRequestError) as wrong_type:
        await run(
            cf.queues.create,
            account_id=ACCOUNT,
            queue_name="ok",
            extra_body={"settings": {"delivery_delay": "soon"}},
        )
    assert _error(wrong_type.value)[0] == 10207
    assert [x.queue_name for x in await run(cf.queues.list, account_id=ACCOUNT)] == ["jobs"]


def _error(e: cloudflare.APIStatusError) -> tuple[int, str]:
    body: Any = e.body
    assert body["success"] is False and len(body["errors"]) == 1, body
    return body["errors"][0]["code"], body["errors"][0]["message"]
