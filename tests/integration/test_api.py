"""The REST API under /client/v4 with a plain aiohttp client, against a real daemon."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

from tests.helpers import eventually
from tests.integration.rest import Rest, accounts_toml, sha256_hex

# ---------------------------------------------------------------- pull protocol


def b64_json(value: Any) -> str:
    return base64.b64encode(
        json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    ).decode()


async def test_pull_encodes_text_as_a_string_and_json_as_base64(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work")
    before = int(time.time() * 1000)
    await api.push("work", {"name": "Zoë", "n": [1, 2]})
    await api.push("work", "héllo wörld", content_type="text")
    await api.push("work", "a json string")
    pulled = await api.pull("work", batch_size=10)
    assert pulled["message_backlog_count"] == 3
    assert pulled["metadata"]["metrics"]["backlog_count"] == 3
    got = {m["metadata"]["CF-Content-Type"] + ":" + m["body"] for m in pulled["messages"]}
    assert got == {
        "json:" + b64_json({"name": "Zoë", "n": [1, 2]}),
        "text:héllo wörld",
        "json:" + b64_json("a json string"),
    }
    for m in pulled["messages"]:
        assert len(m["id"]) == 32 and int(m["id"], 16) >= 0
        assert m["attempts"] == 1 and m["lease_id"]
        assert before <= m["timestamp_ms"] <= int(time.time() * 1000)


async def test_a_lapsed_lease_makes_the_message_pullable_again(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work")
    await api.push("work", {"job": 1})
    first = (await api.pull("work", visibility_timeout_ms=500))["messages"]
    assert [m["attempts"] for m in first] == [1]
    assert (await api.pull("work"))["messages"] == []  # leased: invisible to other pullers

    async def pulled_again() -> list[dict[str, Any]]:
        return (await api.pull("work", visibility_timeout_ms=60_000))["messages"]

    again = await eventually(pulled_again, timeout=5)
    assert [(m["id"], m["attempts"]) for m in again] == [(first[0]["id"], 2)]
    assert again[0]["lease_id"] != first[0]["lease_id"]


async def test_retries_past_max_retries_land_in_the_dead_letter_queue(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work", dlq="work-dlq", max_retries=2)
    await api.push("work", {"job": "doomed"})
    seen = []
    for _ in range(3):
        [m] = (await api.pull("work"))["messages"]
        seen.append(m)
        result = await api.ack("work", retries=[{"lease_id": m["lease_id"], "delay_seconds": 0}])
        assert (result["ackCount"], result["retryCount"], result["warnings"]) == (0, 1, {})
    assert [m["attempts"] for m in seen] == [1, 2, 3]  # max_retries + 1 deliveries
    assert await api.backlog("work") == 0
    assert await api.backlog("work-dlq") == 1
    assert (await api.pull("work"))["messages"] == []

    await api.pull_consumer("work-dlq")
    [dead] = (await api.pull("work-dlq"))["messages"]
    assert dead["id"] == seen[0]["id"] and dead["timestamp_ms"] == seen[0]["timestamp_ms"]
    assert dead["body"] == b64_json({"job": "doomed"})
    assert dead["attempts"] == 1  # attempts start again in the dead-letter queue


async def test_a_lease_that_lapses_on_the_last_attempt_dead_letters_the_message(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work", dlq="work-dlq", max_retries=0)
    await api.push("work", "once", content_type="text")
    [m] = (await api.pull("work", visibility_timeout_ms=100))["messages"]

    async def dead_lettered() -> bool:
        # a pull is what notices the spent lease; it must not deliver the message again
        assert (await api.pull("work"))["messages"] == []
        return await api.backlog("work-dlq") == 1

    await eventually(dead_lettered, timeout=5)
    assert await api.backlog("work") == 0
    [dead] = (await api.ok("POST", "/queues/work-dlq/messages/peek", {}))["messages"]
    assert (dead["id"], dead["body"]) == (m["id"], "once")


async def test_a_deleted_dead_letter_queue_is_created_again_instead_of_losing_messages(
    start_daemon,
):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work", dlq="work-dlq", max_retries=0)
    assert await api.ok("DELETE", "/queues/work-dlq") is None
    await api.push("work", "keep me", content_type="text")
    [m] = (await api.pull("work"))["messages"]
    result = await api.ack("work", retries=[{"lease_id": m["lease_id"]}])
    assert result["retryCount"] == 1
    [dead] = (await api.ok("POST", "/queues/work-dlq/messages/peek", {}))["messages"]
    assert (dead["id"], dead["body"]) == (m["id"], "keep me")


async def test_an_ack_after_the_lease_lapsed_is_still_accepted(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work")
    await api.push("work", "late", content_type="text")
    [m] = (await api.pull("work", visibility_timeout_ms=100))["messages"]

    async def visible_again() -> bool:
        peeked = await api.ok("POST", "/queues/work/messages/peek", {})
        return [p["id"] for p in peeked["messages"]] == [m["id"]]

    await eventually(visible_again, timeout=5)
    result = await api.ack("work", acks=[m["lease_id"]])
    assert (result["ackCount"], result["warnings"]) == (1, {})
    assert await api.backlog("work") == 0
    assert (await api.pull("work"))["messages"] == []


async def test_forged_and_foreign_lease_ids_ack_nothing_and_are_warned_about(start_daemon):
    api = Rest(await start_daemon())
    for name in ("a", "b"):
        await api.create_queue(name)
        await api.pull_consumer(name)
        await api.push(name, name, content_type="text")
    [ma] = (await api.pull("a"))["messages"]
    [mb] = (await api.pull("b"))["messages"]
    head, mac = ma["lease_id"].split(".")
    tampered = f"{head}.{'A' if mac[0] != 'A' else 'B'}{mac[1:]}"
    forged = ["not-a-lease", tampered, mb["lease_id"]]
    result = await api.ack(
        "a", acks=forged[:2], retries=[{"lease_id": forged[2], "delay_seconds": 0}]
    )
    assert (result["ackCount"], result["retryCount"]) == (0, 0)
    assert set(result["warnings"]) == set(forged)
    assert await api.backlog("a") == 1 and await api.backlog("b") == 1
    assert (await api.pull("b"))["messages"] == []  # b's message is still leased

    # the genuine leases still work where they belong
    assert (await api.ack("a", acks=[ma["lease_id"]]))["ackCount"] == 1
    assert (await api.ack("b", acks=[mb["lease_id"]]))["ackCount"] == 1
    assert await api.backlog("a") == 0 and await api.backlog("b") == 0


async def parked_poll(d, api: Rest, wait_ms: int) -> asyncio.Task:
    """Queue "work" with a pull consumer, and a long poll on it that is parked waiting for
    a commit on that queue (what a push, a pause or a shutdown must then wake)."""
    q = await api.create_queue("work")
    await api.pull_consumer("work")
    store = d.daemon.store
    key = store.queue_by_id(q["queue_id"]).key
    poll = asyncio.create_task(api.pull("work", wait_ms=wait_ms))
    await eventually(lambda: key in store.catalogue.watched(), timeout=5)
    return poll


async def test_a_long_poll_is_woken_by_a_push(start_daemon):
    d = await start_daemon()
    api = Rest(d)
    started = time.monotonic()
    poll = await parked_poll(d, api, 10_000)
    assert not poll.done()
    await api.push("work", "wake up", content_type="text")
    pulled = await asyncio.wait_for(poll, timeout=5)
    assert [m["body"] for m in pulled["messages"]] == ["wake up"]
    assert time.monotonic() - started < 3  # well before the 10 s wait ends


async def test_a_long_poll_on_an_empty_queue_returns_empty_after_wait_ms(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work")
    started = time.monotonic()
    pulled = await api.pull("work", wait_ms=300)
    elapsed = time.monotonic() - started
    assert pulled["messages"] == [] and pulled["message_backlog_count"] == 0
    assert 0.29 <= elapsed < 3


async def test_a_long_poll_gets_a_message_whose_lease_lapses_while_it_waits(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work")
    await api.push("work", "again", content_type="text")
    [m] = (await api.pull("work", visibility_timeout_ms=200))["messages"]
    started = time.monotonic()
    pulled = await api.pull("work", wait_ms=10_000)
    assert [(x["id"], x["attempts"]) for x in pulled["messages"]] == [(m["id"], 2)]
    assert time.monotonic() - started < 5  # woken when the lease lapsed, not at 10 s


async def test_a_long_poll_ends_empty_when_its_queue_is_paused(start_daemon):
    d = await start_daemon()
    api = Rest(d)
    poll = await parked_poll(d, api, 10_000)
    await api.ok("PATCH", "/queues/work", {"settings": {"delivery_paused": True}})
    await api.push("work", "not while paused", content_type="text")
    pulled = await asyncio.wait_for(poll, timeout=5)
    assert pulled["messages"] == []
    await api.ok("PATCH", "/queues/work", {"settings": {"delivery_paused": False}})
    assert [m["body"] for m in (await api.pull("work"))["messages"]] == ["not while paused"]


async def test_pull_from_a_paused_queue_is_a_409_and_leases_nothing(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work")
    await api.push("work", "held", content_type="text")
    await api.ok("PATCH", "/queues/work", {"settings": {"delivery_paused": True}})
    status, out = await api.call("POST", "/queues/work/messages/pull", {})
    assert status == 409 and out["success"] is False
    assert out["errors"] == [{"code": 10252, "message": "queue_delivery_paused"}]
    await api.push("work", "still accepted", content_type="text")  # paused queues store
    assert await api.backlog("work") == 2
    await api.ok("PATCH", "/queues/work", {"settings": {"delivery_paused": False}})
    pulled = await api.pull("work", batch_size=10)
    assert sorted(m["body"] for m in pulled["messages"]) == ["held", "still accepted"]
    assert all(m["attempts"] == 1 for m in pulled["messages"])


async def test_v8_messages_are_refused_to_pull_consumers_and_kept(start_daemon):
    d = await start_daemon()
    api = Rest(d)
    await api.pull_consumer("jobs")
    status, _ = await d.post("/send", {"v8_sample": True, "contentType": "v8"})
    assert status == 200
    await api.push("jobs", {"plain": True})
    status, out = await api.call("POST", "/queues/jobs/messages/pull", {"batch_size": 10})
    assert status == 200
    messages = out["result"]["messages"]
    assert [m["body"] for m in messages] == [b64_json({"plain": True})]
    [note] = out["messages"]
    assert "v8" in note
    assert out["result"]["message_backlog_count"] == 2  # the v8 message still counts
    await api.ack("jobs", acks=[messages[0]["lease_id"]])

    status, out = await api.call("POST", "/queues/jobs/messages/pull", {"batch_size": 10})
    assert out["result"]["messages"] == [] and len(out["messages"]) == 1
    assert await api.backlog("jobs") == 1
    peeked = await api.ok("POST", "/queues/jobs/messages/peek", {"batch_size": 10})
    [v8] = peeked["messages"]
    assert v8["metadata"]["CF-Content-Type"] == "v8" and v8["id"] in note
    assert v8["attempts"] == 0  # refusing it spent no attempt


# ---------------------------------------------------------------- accounts and auth

TOKEN_A = "token-for-acme"
TOKEN_B = "token-for-beta"


async def test_accounts_only_see_their_own_queues(start_daemon):
    d = await start_daemon(
        worker_extra='account = "acme"',
        queues=accounts_toml({"acme": TOKEN_A, "beta": TOKEN_B}),
    )
    a = Rest(d, "acme", TOKEN_A)
    b = Rest(d, "beta", TOKEN_B)
    secret = await b.create_queue("secret")
    await b.push("secret", "for beta only", content_type="text")
    assert [q["queue_name"] for q in await a.ok("GET", "/queues")] == ["jobs"]
    assert [q["queue_name"] for q in await b.ok("GET", "/queues")] == ["secret"]

    denied = {"code": 10000, "message": "Authentication error"}
    attempts = [
        ("GET", "/queues", "beta"),
        ("GET", f"/queues/{secret['queue_id']}", "beta"),
        ("POST", "/queues/secret/messages", "beta"),
        ("POST", "/queues/secret/messages/pull", "beta"),
        ("DELETE", "/queues/secret", "beta"),
        ("GET", "/queues", "no-such-account"),
        ("GET", "/queues", "local"),  # with [[accounts]], "local" is not served
    ]
    for method, path, account in attempts:
        status, out = await a.call(method, path, {"body": "x"}, account=account)
        assert (status, out["success"], out["errors"]) == (403, False, [denied]), (path, account)

    # beta's queue id means nothing inside acme: the same 404 as a queue that doesn't exist
    status, out = await a.call("GET", f"/queues/{secret['queue_id']}")
    assert status == 404 and out["errors"][0]["code"] == 11000
    status, out = await a.call("POST", f"/queues/{secret['queue_id']}/messages", {"body": 1})
    assert status == 404
    assert await b.backlog("secret") == 1
    assert (await b.ok("GET", f"/queues/{secret['queue_id']}"))["queue_name"] == "secret"


async def test_a_wrong_or_missing_token_is_a_403(start_daemon):
    d = await start_daemon(queues=accounts_toml({"acme": TOKEN_A}))
    api = Rest(d, "acme", TOKEN_A)
    await api.create_queue("work")
    for token in (None, "", "wrong", TOKEN_B, sha256_hex(TOKEN_A)):
        status, out = await api.call("GET", "/queues", token=token)
        assert status == 403 and out["errors"][0]["code"] == 10000, token
    url = api.url("/queues")
    for header in (f"Basic {TOKEN_A}", TOKEN_A, f"Bearer{TOKEN_A}"):
        async with d.session.get(url, headers={"Authorization": header}) as r:
            assert r.status == 403 and (await r.json())["errors"][0]["code"] == 10000, header
    assert [q["queue_name"] for q in await api.ok("GET", "/queues")] == ["work"]


async def test_a_read_role_token_reads_but_every_change_is_a_403(start_daemon):
    reader = "token-that-only-reads"
    accounts = (
        f'[[accounts]]\nid = "acme"\ntoken_sha256 = ["{sha256_hex(TOKEN_A)}", '
        f'{{ sha256 = "{sha256_hex(reader)}", role = "read" }}]\n'
    )
    d = await start_daemon(worker_extra='account = "acme"', queues=accounts)
    admin, read = Rest(d, "acme", TOKEN_A), Rest(d, "acme", reader)
    await admin.push("jobs", {"n": 1})
    assert [q["queue_name"] for q in await read.ok("GET", "/queues")] == ["jobs"]
    assert (
        len((await read.ok("POST", "/queues/jobs/messages/peek", {"batch_size": 5}))["messages"])
        == 1
    )
    assert len((await read.ok("POST", "/queues/jobs/messages/browse", {}))["messages"]) == 1
    for method, path, body in [
        ("POST", "/queues/jobs/messages", {"body": 1}),
        ("PATCH", "/queues/jobs", {"settings": {"delivery_paused": True}}),
        ("POST", "/queues/jobs/purge", {"delete_messages_permanently": True}),
        ("POST", "/queues", {"queue_name": "more"}),
        ("POST", "/queues/jobs/messages/move", {"action": "delete"}),
    ]:
        status, out = await read.call(method, path, body)
        assert status == 403 and out["errors"][0]["code"] == 10000, path
    assert await admin.backlog("jobs") == 1


async def test_open_mode_serves_account_local_to_any_token(start_daemon):
    d = await start_daemon()
    for token in (None, "anything", "something else"):
        api = Rest(d, "local", token)
        assert [q["queue_name"] for q in await api.ok("GET", "/queues")] == ["jobs"]
        status, out = await api.call("GET", "/queues", account="acme")
        assert status == 403 and out["errors"][0]["code"] == 10000


# ---------------------------------------------------------------- queues


async def test_queue_ids_and_api_queues_survive_a_restart(start_daemon):
    d = await start_daemon()
    api = Rest(d)
    made = await api.create_queue("made", delivery_delay=3, message_retention_period=7200)
    consumer = await api.pull_consumer("made", visibility_timeout_ms=1234)
    await api.push("made", "kept", content_type="text", delay_seconds=0)
    before = {q["queue_name"]: q for q in await api.ok("GET", "/queues")}
    assert set(before) == {"jobs", "made"}
    for q in before.values():
        qid = q["queue_id"]
        assert len(qid) == 32 and qid == qid.lower() and int(qid, 16) >= 0
    await d.daemon.shutdown(timeout_s=1)

    api = Rest(await start_daemon())
    after = {q["queue_name"]: q for q in await api.ok("GET", "/queues")}
    assert {n: q["queue_id"] for n, q in after.items()} == {
        n: q["queue_id"] for n, q in before.items()
    }
    assert after["made"]["settings"] == made["settings"]
    assert after["made"]["consumers"] == [consumer]
    [m] = (await api.pull("made"))["messages"]
    assert m["body"] == "kept"


async def test_config_queues_cannot_be_deleted_over_the_api(start_daemon):
    d = await start_daemon(
        consumers='[[workers.queues.consumers]]\nqueue = "jobs"\ndead_letter_queue = "jobs-dlq"\n',
        queues='[[queues]]\nname = "declared"\n',
    )
    api = Rest(d)
    for name in ("jobs", "jobs-dlq", "declared"):
        status, out = await api.call("DELETE", f"/queues/{name}")
        assert status == 409 and out["success"] is False, (name, out)
        assert "config" in out["errors"][0]["message"], out
        await api.ok("GET", f"/queues/{name}")  # still there
    made = await api.create_queue("made")
    assert await api.ok("DELETE", f"/queues/{made['queue_id']}") is None
    status, out = await api.call("GET", "/queues/made")
    assert status == 404 and out["errors"][0]["code"] == 11000
    names = [q["queue_name"] for q in await api.ok("GET", "/queues")]
    assert names == ["declared", "jobs", "jobs-dlq"]


async def test_concurrent_creates_of_one_name_make_one_queue(start_daemon):
    api = Rest(await start_daemon())
    results = await asyncio.gather(
        *(api.call("POST", "/queues", {"queue_name": "race"}) for _ in range(5))
    )
    statuses = sorted(status for status, _ in results)
    assert statuses == [200, 409, 409, 409, 409], results
    assert {out["errors"][0]["code"] for status, out in results if status == 409} == {11009}
    assert [q["queue_name"] for q in await api.ok("GET", "/queues")] == ["jobs", "race"]


async def test_concurrent_patches_both_take_effect(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await asyncio.gather(
        api.ok("PATCH", "/queues/work", {"settings": {"delivery_paused": True}}),
        api.ok("PATCH", "/queues/work", {"settings": {"delivery_delay": 7}}),
        api.ok("PATCH", "/queues/work", {"settings": {"message_retention_period": 600}}),
    )
    settings = (await api.ok("GET", "/queues/work"))["settings"]
    assert settings == {
        "delivery_delay": 7,
        "delivery_paused": True,
        "message_retention_period": 600,
    }


async def test_listing_filters_by_name_and_pages(start_daemon):
    api = Rest(await start_daemon())
    for i in range(1, 6):
        await api.create_queue(f"q{i}")

    async def names(**params: Any) -> tuple[list[str], dict[str, Any]]:
        status, out = await api.call("GET", "/queues", params=params)
        assert status == 200, out
        return [q["queue_name"] for q in out["result"]], out["result_info"]

    status, out = await api.call("GET", "/queues", params=[("name", "q2"), ("name", "q4")])
    assert [q["queue_name"] for q in out["result"]] == ["q2", "q4"]
    assert (await names(name="nope"))[0] == []
    page1, info = await names(per_page=4)
    page2, info2 = await names(per_page=4, page=2)
    assert page1 == ["jobs", "q1", "q2", "q3"] and page2 == ["q4", "q5"]
    assert (info["total_count"], info["total_pages"], info["count"]) == (6, 2, 4)
    assert (info2["page"], info2["count"]) == (2, 2)
    assert (await names(per_page=4, page=3))[0] == []
    for bad in (
        {"page": "0"},
        {"per_page": "x"},
        {"page": "-1"},
        {"per_page": "1001"},
        {"page": "²"},
        {"page": "9" * 5000},
    ):
        status, out = await api.call("GET", "/queues", params=bad)
        assert status == 400 and out["errors"][0]["code"] == 10207, bad


# ---------------------------------------------------------------- rejected input


async def test_bad_input_is_a_400_with_a_code_and_changes_nothing(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("work")
    await api.pull_consumer("work")
    await api.push("work", "the only one", content_type="text")
    msgs = "/queues/work/messages"
    big = "y" * 100_000
    cases: list[tuple[str, str, Any, int, int]] = [
        # (method, path, body (bytes: sent raw), status, code)
        ("POST", msgs, b'{"body": ', 400, 10208),
        ("POST", msgs, b"", 400, 10208),
        ("POST", msgs, b"\xff\xfe{", 400, 10208),
        ("POST", msgs, b'{"body": NaN}', 400, 10208),
        ("POST", msgs, b"[" * 100_000 + b"]" * 100_000, 400, 10208),
        ("POST", msgs, [{"body": 1}], 400, 10207),
        ("POST", msgs, {}, 400, 10207),
        ("POST", msgs, {"body": 1, "priority": 1}, 400, 10207),
        ("POST", msgs, {"body": 1, "content_type": 5}, 400, 10207),
        ("POST", msgs, {"body": 5, "content_type": "text"}, 400, 10207),
        ("POST", msgs, {"body": 1, "delay_seconds": "5"}, 400, 10203),
        ("POST", msgs, {"body": 1, "delay_seconds": 1.5}, 400, 10203),
        ("POST", msgs, {"body": 1, "delay_seconds": True}, 400, 10203),
        ("POST", msgs, {"body": 1, "delay_seconds": 86_401}, 400, 10203),
        ("POST", msgs, {"body": 1, "delay_seconds": -1}, 400, 10203),
        ("POST", msgs, {"body": "AAE=", "content_type": "bytes"}, 400, 10203),
        ("POST", msgs, {"body": "x", "content_type": "v8"}, 400, 10203),
        ("POST", msgs, {"body": "x" * 128_001, "content_type": "text"}, 400, 10204),
        ("POST", msgs + "/batch", {"messages": [{"body": i} for i in range(101)]}, 400, 10206),
        (
            "POST",
            msgs + "/batch",
            {"messages": [{"body": big, "content_type": "text"}] * 3},
            400,
            10205,
        ),
        (
            "POST",
            msgs + "/batch",
            {"messages": [{"body": "ok"}, {"body": 1, "content_type": "text"}]},
            400,
            10207,
        ),
        ("POST", msgs + "/batch", {"messages": []}, 400, 10207),
        ("POST", msgs + "/batch", {"messages": [1]}, 400, 10207),
        ("POST", msgs + "/batch", {"messages": [{"body": 1}], "delay_seconds": -5}, 400, 10203),
        ("POST", msgs, {"body": "z" * (1024 * 1024)}, 413, 10207),
        ("POST", msgs + "/pull", {"batch_size": 101}, 400, 10207),
        ("POST", msgs + "/pull", {"batch_size": 0}, 400, 10207),
        ("POST", msgs + "/pull", {"visibility_timeout_ms": 0}, 400, 10207),
        ("POST", msgs + "/pull", {"visibility_timeout_ms": 43_200_001}, 400, 10207),
        ("POST", msgs + "/pull", {"wait_ms": 60_000}, 400, 10207),
        ("POST", msgs + "/pull", {"batch": 5}, 400, 10207),
        ("POST", msgs + "/ack", {"acks": [{"lease_id": 5}]}, 400, 10207),
        ("POST", msgs + "/ack", {"acks": ["lease"]}, 400, 10207),
        ("POST", msgs + "/ack", {"retries": [{"lease_id": "x", "delay_seconds": -1}]}, 400, 10203),
        ("POST", msgs + "/peek", {"batch_size": 1000}, 400, 10207),
        ("POST", msgs + "/purge", {"refs": "all"}, 400, 10207),
        ("POST", "/queues/work/purge", {}, 400, 10207),
        ("POST", "/queues/work/purge", {"delete_messages_permanently": "yes"}, 400, 10207),
        ("POST", "/queues", {"queue_name": "bad name"}, 400, 10207),
        ("POST", "/queues", {"queue_name": "x" * 64}, 400, 10207),
        ("POST", "/queues", {"queue_name": 7}, 400, 10207),
        ("POST", "/queues", {"queue_name": "ok", "settings": []}, 400, 10207),
        ("POST", "/queues", {"queue_name": "ok", "settings": {"nope": 1}}, 400, 10207),
        (
            "POST",
            "/queues",
            {"queue_name": "ok", "settings": {"message_retention_period": 59}},
            400,
            10207,
        ),
        ("POST", "/queues", {"queue_name": "work"}, 409, 11009),
        ("PATCH", "/queues/work", {"settings": {"delivery_paused": 1}}, 400, 10207),
        ("PATCH", "/queues/work", {"settings": {"delivery_delay": 86_401}}, 400, 10207),
        ("PUT", "/queues/work", {"queue_name": "jobs"}, 409, 11009),
        ("POST", "/queues/jobs/consumers", {"type": "worker", "script_name": "x"}, 400, 10207),
        ("POST", "/queues/jobs/consumers", {"type": "kafka"}, 400, 10207),
        (
            "POST",
            "/queues/jobs/consumers",
            {"type": "http_pull", "settings": {"max_retries": 101}},
            400,
            10207,
        ),
        (
            "POST",
            "/queues/jobs/consumers",
            {"type": "http_pull", "dead_letter_queue": "jobs"},
            400,
            10207,
        ),
        ("POST", "/queues/work/consumers", {"type": "http_pull"}, 409, 11004),
    ]
    for method, path, body, status, code in cases:
        if isinstance(body, bytes):
            got, out = await api.call(method, path, data=body)
        else:
            got, out = await api.call(method, path, body)
        shown = body if len(repr(body)) < 100 else repr(body)[:100]
        assert (got, out["success"]) == (status, False), (method, path, shown, out)
        assert out["errors"][0]["code"] == code, (method, path, shown, out)
        assert out["result"] is None
        assert await api.backlog("work") == 1, (method, path, shown)

    # Nothing was created, renamed, paused, leased or given a consumer along the way.
    assert [q["queue_name"] for q in await api.ok("GET", "/queues")] == ["jobs", "work"]
    work = await api.ok("GET", "/queues/work")
    assert work["settings"]["delivery_paused"] is False
    assert (await api.ok("GET", "/queues/jobs/consumers")) == []
    [m] = (await api.pull("work"))["messages"]
    assert (m["body"], m["attempts"]) == ("the only one", 1)


async def test_unknown_routes_and_methods_get_the_envelope(start_daemon):
    api = Rest(await start_daemon())
    status, out = await api.call("GET", "/queues/jobs/nothing-here")
    assert status == 404 and out["success"] is False and out["errors"][0]["code"] == 7003
    status, out = await api.call("DELETE", "/queues/jobs/metrics")
    assert status == 405 and out["errors"][0]["code"] == 7001


async def test_shutdown_answers_a_waiting_long_poll_at_once(start_daemon):
    d = await start_daemon()
    api = Rest(d)
    poll = await parked_poll(d, api, 20_000)
    started = time.monotonic()
    await d.daemon.shutdown(timeout_s=30)
    pulled = await asyncio.wait_for(poll, timeout=5)
    assert pulled["messages"] == []
    assert time.monotonic() - started < 5  # not held for the 20 s wait or the 30 s drain
