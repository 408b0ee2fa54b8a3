"""The endpoints wrangler calls before and around the queue API: token status, the
caller's accounts and memberships (paginated), workers as services; worker consumers'
fields; Cloudflare's queue name rule and delay code on REST."""

from __future__ import annotations

from typing import Any

from tests.integration.rest import PREFIX, Rest, accounts_toml

TOKEN_A = "token-for-acme"
TOKEN_B = "token-for-beta"


async def get(d, path: str, token: str | None = None, **params: str) -> tuple[int, Any]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with d.session.get(d.base + PREFIX + path, headers=headers, params=params) as r:
        return r.status, await r.json()


async def test_token_verify_and_accounts_answer_for_the_callers_token(start_daemon):
    tokens = accounts_toml({"acme": TOKEN_A, "beta": TOKEN_B})
    d = await start_daemon(worker_extra='account = "acme"', queues=tokens)

    status, out = await get(d, "/user/tokens/verify", TOKEN_A)
    assert status == 200 and out["result"]["status"] == "active"
    assert len(out["result"]["id"]) == 32 and TOKEN_A not in str(out)
    for token in (None, "wrong"):
        status, out = await get(d, "/user/tokens/verify", token)
        assert (status, out["errors"][0]["code"]) == (401, 1000)

    status, out = await get(d, "/accounts", TOKEN_A)
    assert [a["id"] for a in out["result"]] == ["acme"]  # only the token's own account
    status, out = await get(d, "/memberships", TOKEN_B)
    assert [m["account"]["id"] for m in out["result"]] == ["beta"]
    assert out["result"][0]["status"] == "accepted"
    assert out["result_info"] == {
        "page": 1, "per_page": 20, "count": 1, "total_count": 1, "total_pages": 1
    }  # fmt: skip
    status, page2 = await get(d, "/accounts", TOKEN_B, page="2", per_page="1")
    assert page2["result"] == [] and page2["result_info"]["total_count"] == 1
    status, out = await get(d, "/accounts", "wrong")
    assert (status, out["errors"][0]["code"]) == (403, 10000)
    status, out = await get(d, "/user", TOKEN_A)
    assert (status, out["errors"][0]["code"]) == (403, 9109)


async def test_open_mode_answers_a_fixed_active_token_and_the_local_account(start_daemon):
    d = await start_daemon()
    status, out = await get(d, "/user/tokens/verify")
    assert status == 200 and out["result"]["status"] == "active"
    status, out = await get(d, "/memberships", "anything")
    assert [m["account"] for m in out["result"]] == [{"id": "local", "name": "ocd local"}]


async def test_worker_consumers_carry_script_script_name_and_service(start_daemon):
    d = await start_daemon(consumers='[[workers.queues.consumers]]\nqueue = "jobs"\n')
    api = Rest(d)
    [consumer] = await api.ok("GET", "/queues/jobs/consumers")
    assert (consumer["script"], consumer["script_name"], consumer["service"]) == ("app",) * 3
    assert consumer["environment"] == "production"
    service = await api.ok("GET", "/workers/services/app")
    assert service["default_environment"]["environment"] == consumer["environment"]
    status, out = await api.call("GET", "/workers/services/nope")
    assert (status, out["errors"][0]["code"]) == (404, 10090)


async def test_event_subscriptions_are_a_clean_not_supported_error(start_daemon):
    d = await start_daemon()
    api = Rest(d)
    status, out = await api.call("POST", "/event_subscriptions/subscriptions", {"name": "x"})
    assert status == 501 and out["errors"][0]["code"] == 11011
    assert "not supported by ocd" in out["errors"][0]["message"]


async def test_queue_names_follow_cloudflares_rule_and_delays_are_10203(start_daemon):
    d = await start_daemon()
    api = Rest(d)
    for name in ("My_Queue", "ends-with-dash-", "UPPER", "x" * 64):
        status, out = await api.call("POST", "/queues", {"queue_name": name})
        assert (status, out["errors"][0]["code"]) == (400, 10207), name
        assert "lowercase letters, digits and '-'" in out["errors"][0]["message"]
    assert (await api.create_queue("orders.fifo"))["queue_name"] == "orders.fifo"
    await api.create_queue("plain-1")
    for body in ({"body": 1, "delay_seconds": 90_000}, {"body": 1, "delay_seconds": -1}):
        status, out = await api.call("POST", "/queues/plain-1/messages", body)
        assert (status, out["errors"][0]["code"]) == (400, 10203)
        assert out["errors"][0]["source"] == {"pointer": "/delay_seconds"}
