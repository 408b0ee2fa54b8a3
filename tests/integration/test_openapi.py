"""GET /client/v4/openapi.json: a valid OpenAPI 3.1 document that describes exactly the routes
the API registers, and whose schemas the real responses satisfy."""

from __future__ import annotations

import io
import json
from typing import Any

import aiohttp
from aiohttp import web
from openapi_spec_validator import validate

from ocd.errors import StoreFull, StoreUnavailable
from ocd.http.cloudflare.app import PREFIX
from ocd.http.cloudflare.envelope import enveloped
from ocd.http.cloudflare.openapi import ALWAYS_FAIL, document
from tests.integration.conftest import Running
from tests.openapi_schemas import DOC, problems, response_validator

WORKER_CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_concurrency = 2
"""


def api_app(running: Running) -> web.Application:
    runner = running.daemon.listeners.runner
    assert runner is not None
    return runner.app


def registered(app: web.Application) -> set[tuple[str, str]]:
    """(method, path relative to PREFIX) of every API route. Each API path also has a "*"
    route answering other methods with 405, and one "*" route catches unknown API paths
    with 404: those are not operations."""
    routes = set()
    for route in app.router.routes():
        assert route.resource is not None
        path = route.resource.canonical
        if not path.startswith(PREFIX + "/") or route.method == "*":
            continue
        routes.add((route.method, path.removeprefix(PREFIX)))
    # aiohttp's add_get also answers HEAD on the same path; that HEAD is implied by the GET
    return {(m, p) for m, p in routes if not (m == "HEAD" and ("GET", p) in routes)}


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    methods = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
    return {(m.upper(), path) for path, item in doc["paths"].items() for m in item if m in methods}


async def test_the_served_document_is_valid_openapi(start_daemon):
    running = await start_daemon()
    async with running.session.get(f"{running.base}{PREFIX}/openapi.json") as r:
        assert r.status == 200
        assert r.content_type == "application/json"
        doc = await r.json()
    validate(doc)  # raises with the offending path if the document is not valid OpenAPI
    assert doc == json.loads(json.dumps(document()))
    assert doc["openapi"].startswith("3.")
    assert doc["servers"] == [{"url": PREFIX}]
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


async def test_the_document_and_the_router_list_the_same_operations(start_daemon):
    running = await start_daemon()
    routes = registered(api_app(running))
    ops = documented(DOC)
    assert routes - ops == set(), "routes the OpenAPI document does not describe"
    assert ops - routes == set(), "documented operations no route serves"
    assert ("POST", "/accounts/{account_id}/queues/{queue_id}/messages/pull") in ops


def test_every_path_parameter_is_declared_and_every_operation_named():
    ids = []
    for path, item in DOC["paths"].items():
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert declared == {part[1:-1] for part in path.split("/") if part.startswith("{")}, path
        for method, op in item.items():
            if method == "parameters":
                continue
            ids.append(op["operationId"])
            assert op["responses"]["200"], (method, path)
    assert len(ids) == len(set(ids))


def test_error_codes_are_listed_per_status():
    pull = DOC["paths"]["/accounts/{account_id}/queues/{queue_id}/messages/pull"]["post"]
    responses = pull["responses"]
    assert {"200", "400", "403", "404", "408", "409", "413", "415", "500", "503", "507"} == set(
        responses
    )
    assert "`11010`" in responses["400"]["description"]
    assert "`10252`" in responses["409"]["description"]
    codes = responses["409"]["content"]["application/json"]["schema"]["properties"]["errors"]
    assert codes["items"]["properties"]["code"]["enum"] == [10252]


def _codes(doc: dict[str, Any], response: dict[str, Any]) -> list[int]:
    if "$ref" in response:
        response = doc["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    errors = response["content"]["application/json"]["schema"]["properties"]["errors"]
    codes: list[int] = errors["items"]["properties"]["code"]["enum"]
    return codes


def test_every_operation_documents_the_faults_it_can_meet():
    """The answers a fault gives rather than the request's own mistake: the connection cap
    (503 15002) anywhere; the database unreachable (503 15001) where the database is used;
    the storage full (507 10251) where it is written; a body's timeout (408), size once
    inflated (413) and unknown Content-Encoding (415) where a body is read."""
    reads = {"messages-peek", "messages-browse", "messages-search"}
    for path, item in DOC["paths"].items():
        on_database = "/queues" in path or "/move_tasks" in path
        for method, op in item.items():
            if method == "parameters":
                continue
            responses = op["responses"]
            where = (method, path)
            assert 15002 in _codes(DOC, responses["503"]), where
            assert (15001 in _codes(DOC, responses["503"])) == on_database, where
            if "requestBody" in op:
                assert _codes(DOC, responses["408"]) == [10208], where
                assert _codes(DOC, responses["415"]) == [10208], where
                assert _codes(DOC, responses["413"]) == [10207], where
            writes = on_database and method != "get" and op["operationId"] not in reads
            assert ("507" in responses) == writes, where
            if writes:
                assert _codes(DOC, responses["507"]) == [10251], where
            for status in ("503", "507"):
                if status in responses:
                    shared = DOC["components"]["responses"][
                        responses[status]["$ref"].rsplit("/", 1)[1]
                    ]
                    assert "Retry-After" in shared["headers"], where


async def test_store_faults_are_answered_as_the_document_says():
    """The envelope the API routes answer a full disk and an unreachable database with,
    over a real socket, matches every operation's documented 507 and 503."""

    async def full(request: web.Request) -> web.Response:
        raise StoreFull("the disk is full: /var/lib/ocd has no space left", "/var/lib/ocd")

    async def away(request: web.Request) -> web.Response:
        raise StoreUnavailable("connection refused", "postgresql://db/ocd")

    app = web.Application()
    app.router.add_post("/full", enveloped(full))
    app.router.add_post("/away", enveloped(away))
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    answers: dict[int, tuple[dict[str, str], Any]] = {}
    try:
        async with aiohttp.ClientSession() as s:
            for route in ("full", "away"):
                async with s.post(f"http://127.0.0.1:{port}/{route}") as r:
                    answers[r.status] = dict(r.headers), await r.json()
    finally:
        await runner.cleanup()
    assert set(answers) == {503, 507}
    checked = 0
    for path, item in DOC["paths"].items():
        for method in item:
            for status, (headers, out) in answers.items():
                if method == "parameters" or str(status) not in item[method]["responses"]:
                    continue
                if status == 503 and "/queues" not in path and "/move_tasks" not in path:
                    continue  # these never reach the database: only the connection cap
                validator = response_validator(method, path, status)
                assert validator is not None
                assert problems(validator, out) == [], (method, path, status, out)
                assert int(headers["Retry-After"]) >= 0
                checked += 1
    assert checked > 20


class Client:
    """Calls operations by their documented path template and checks every response
    against the document's schema for that status; remembers what it called."""

    def __init__(self, running: Running) -> None:
        self.running = running
        self.ids = {"account_id": "local"}
        self.seen: set[tuple[str, str]] = set()

    async def call(
        self,
        method: str,
        template: str,
        body: Any = None,
        *,
        expect: int = 200,
        data: bytes | None = None,
        params: Any = None,
        **ids: str,
    ) -> Any:
        url = self.running.base + PREFIX + template.format(**(self.ids | ids))
        if body is not None:
            data = json.dumps(body).encode()
        payload = None if data is None else io.BytesIO(data)  # aiohttp warns on big raw bytes
        headers = None if data is None else {"Content-Type": "application/json"}
        async with self.running.session.request(
            method, url, data=payload, params=params, headers=headers
        ) as r:
            status, out = r.status, await r.json()
        assert status == expect, (method, template, status, out)
        validator = response_validator(method, template, status)
        assert validator is not None, f"{method} {template} answered an undocumented {status}"
        assert problems(validator, out) == [], (method, template, status, out)
        if status < 300:
            self.seen.add((method, template))
        return out["result"]


Q = "/accounts/{account_id}/queues"
ONE = Q + "/{queue_id}"
C = ONE + "/consumers"
M = ONE + "/messages"


async def test_real_responses_match_the_documented_schemas(start_daemon):
    """One pass over every operation, successes and the documented failures alike."""
    api = Client(await start_daemon(consumers=WORKER_CONSUMER))
    call = api.call

    work = await call("POST", Q, {"queue_name": "work", "settings": {"delivery_delay": 0}})
    api.ids["queue_id"] = work["queue_id"]
    await call("POST", Q, {"queue_name": "work"}, expect=409)
    await call("POST", Q, {"queue_name": "no spaces"}, expect=400)
    await call("POST", Q, data=b"", expect=400)
    await call("POST", Q, data=b"{", expect=400)
    listed = await call("GET", Q, params=[("name", "work"), ("name", "jobs"), ("per_page", "1")])
    assert len(listed) == 1
    await call("GET", Q, params={"page": "0"}, expect=400)
    await call("GET", Q, account_id="someone-else", expect=403)

    await call("GET", ONE)
    await call("GET", ONE, queue_id="nope", expect=404)
    jobs = await call("GET", ONE, queue_id="jobs")
    assert jobs["consumers"][0]["type"] == "worker" and jobs["producers"]
    await call("PUT", ONE, {"settings": {"message_retention_period": 3600}})
    await call("PATCH", ONE, {"queue_name": "work", "settings": {"delivery_paused": False}})
    await call("PATCH", ONE, {"queue_name": "renamed"}, queue_id="jobs", expect=409)
    await call("PATCH", ONE, {"settings": {"delivery_delay": -1}}, expect=400)
    await call("GET", ONE + "/metrics")

    consumer = await call(
        "POST",
        C,
        {"type": "http_pull", "dead_letter_queue": "work-dlq", "settings": {"batch_size": 5}},
    )
    api.ids["consumer_id"] = consumer["consumer_id"]
    await call("POST", C, {"type": "http_pull"}, expect=409)
    await call("GET", C)
    await call("GET", C + "/{consumer_id}")
    await call("GET", C + "/{consumer_id}", consumer_id="0" * 32, expect=404)
    await call("PUT", C + "/{consumer_id}", {"settings": {"visibility_timeout_ms": 60_000}})
    worker = (await call("GET", C, queue_id="jobs"))[0]
    await call("GET", C + "/{consumer_id}", queue_id="jobs", consumer_id=worker["consumer_id"])
    await call(
        "DELETE",
        C + "/{consumer_id}",
        queue_id="jobs",
        consumer_id=worker["consumer_id"],
        expect=409,
    )

    await call("POST", M, {"body": {"n": 1}})
    await call("POST", M, {"body": "words", "content_type": "text", "delay_seconds": 0})
    await call("POST", M, {"body": 1, "content_type": "bytes"}, expect=400)
    await call("POST", M, {"body": "x" * 130_000}, expect=400)
    await call("POST", M, data=b'{"body": "' + b"x" * (1 << 20) + b'"}', expect=413)
    await call("POST", M + "/batch", {"messages": [{"body": 2}, {"body": 3}], "delay_seconds": 0})
    await call("POST", M + "/batch", {"messages": [{"body": 0}] * 101}, expect=400)
    await call("POST", M + "/batch", {"messages": [{"body": "y" * 100_000}] * 3}, expect=400)

    pulled = await call("POST", M + "/pull", {"batch_size": 2, "visibility_timeout_ms": 60_000})
    leases = [m["lease_id"] for m in pulled["messages"]]
    assert len(leases) == 2
    acked = await call(
        "POST",
        M + "/ack",
        {
            "acks": [{"lease_id": leases[0]}],
            "retries": [{"lease_id": leases[1]}, {"lease_id": "x"}],
        },
    )
    assert acked["ackCount"] == 1 and acked["retryCount"] == 1 and acked["warnings"]
    peeked = await call("POST", M + "/peek", {"batch_size": 10})
    refs = [{"ref": m["ref"]} for m in peeked["messages"][:1]]
    await call("POST", M + "/purge", {"refs": [*refs, {"ref": "bogus"}]})
    await call("POST", M + "/pull", queue_id="work-dlq", expect=400)  # no pull consumer
    await call("POST", M + "/ack", {"acks": []}, queue_id="work-dlq", expect=400)
    await call("PATCH", ONE, {"settings": {"delivery_paused": True}})
    await call("POST", M + "/pull", expect=409)

    # ocd's extensions: browse by cursor, bounded search, bulk move tasks
    page = await call("POST", M + "/browse", {"limit": 1, "order": "newest", "state": "any"})
    assert len(page["messages"]) == 1 and page["cursor"]
    await call("POST", M + "/browse", {"cursor": page["cursor"], "min_attempts": 0})
    await call("POST", M + "/browse", {"cursor": "x"}, expect=400)
    found = await call("POST", M + "/search", {"query": "words"})
    assert found["scanned"] >= 1 and found["messages"]
    await call("POST", M + "/search", {}, expect=400)
    task = await call("POST", M + "/move", {"action": "redrive", "destination": "work-dlq"})
    await call("POST", M + "/move", {"action": "redrive"}, expect=400)  # no source queue
    await call("GET", "/accounts/{account_id}/move_tasks")
    await call("GET", "/accounts/{account_id}/move_tasks/{task_id}", task_id=task["id"])
    await call("GET", "/accounts/{account_id}/move_tasks/{task_id}", task_id="nope", expect=404)
    await call("POST", "/accounts/{account_id}/move_tasks/{task_id}/cancel", task_id=task["id"])

    await call("POST", ONE + "/purge", {}, expect=400)
    await call("GET", ONE + "/purge")
    await call("POST", ONE + "/purge", {"delete_messages_permanently": True})
    await call("GET", ONE + "/purge")

    await call("DELETE", C + "/{consumer_id}")
    await call("DELETE", ONE, queue_id="jobs", expect=409)
    await call("DELETE", ONE)
    await call("DELETE", ONE, expect=404)

    token = await call("GET", "/user/tokens/verify")
    assert token["status"] == "active"
    await call("GET", "/user", expect=403)
    [account] = await call("GET", "/accounts", params={"per_page": "5"})
    [member] = await call("GET", "/memberships")
    assert account["id"] == member["account"]["id"] == "local"
    await call("GET", "/accounts", params={"page": "0"}, expect=400)
    await call("GET", "/memberships", params={"page": "0"}, expect=400)
    await call("GET", "/accounts/{account_id}/workers/services/{name}", name="app")
    await call("GET", "/accounts/{account_id}/workers/services/{name}", name="nope", expect=404)
    subs = "/accounts/{account_id}/event_subscriptions/subscriptions"
    await call("GET", subs, expect=501)
    await call("POST", subs, {"name": "x"}, expect=501)
    for method in ("GET", "PATCH", "DELETE"):
        await call(method, subs + "/{subscription_id}", subscription_id="s1", expect=501)

    ops = {op for op in documented(DOC) if op[1] != "/openapi.json"}
    never_succeed = {
        (m.upper(), path)
        for path, item in DOC["paths"].items()
        for m, op in item.items()
        if m != "parameters" and op["operationId"] in ALWAYS_FAIL
    }
    missing = ops - never_succeed - api.seen
    assert missing == set(), "operations this walk never saw succeed"


async def test_fifo_queue_responses_match_the_documented_schemas(start_daemon):
    """A FIFO queue's settings and the FIFO type rules' refusals, as documented."""
    api = Client(await start_daemon())
    call = api.call
    fifo = {"content_based_deduplication": True, "deduplication_scope": "message_group"}
    orders = await call("POST", Q, {"queue_name": "orders.fifo", "settings": fifo})
    assert orders["settings"]["deduplication_scope"] == "message_group"
    api.ids["queue_id"] = orders["queue_id"]
    await call("GET", ONE)
    await call("GET", Q)
    await call("PATCH", ONE, {"settings": {"content_based_deduplication": False}})
    await call("PUT", ONE, {"queue_name": "shop.fifo", "settings": fifo})
    await call("PATCH", ONE, {"queue_name": "shop"}, expect=400)
    await call("POST", Q, {"queue_name": "plain", "settings": fifo}, expect=400)
    await call("POST", C, {"type": "http_pull", "dead_letter_queue": "dlq"}, expect=400)
    put = C + "/{consumer_id}"
    await call("PUT", put, {"dead_letter_queue": "dlq"}, consumer_id="0" * 32, expect=400)
    await call("POST", C, {"type": "http_pull", "dead_letter_queue": "dlq.fifo"})
    await call("POST", M, {"body": 1}, expect=400)  # no message_group_id
    await call("POST", M, {"body": 1, "message_group_id": "g", "delay_seconds": 1}, expect=400)
    await call("POST", M, {"body": 1, "message_group_id": "g g"}, expect=400)
    await call("POST", M + "/batch", {"messages": [{"body": 1}]}, expect=400)


async def test_fifo_pull_and_peek_responses_match_the_documented_schemas(start_daemon):
    """Needs the store's FIFO path: FIFO messages stored, then pulled and peeked."""
    api = Client(await start_daemon())
    call = api.call
    orders = await call("POST", Q, {"queue_name": "orders.fifo"})
    api.ids["queue_id"] = orders["queue_id"]
    await call("POST", C, {"type": "http_pull"})
    keys = {"message_group_id": "g", "message_deduplication_id": "d"}
    await call("POST", M, {"body": 1, **keys})
    other = {"message_group_id": "h", "message_deduplication_id": "e"}
    await call("POST", M + "/batch", {"messages": [{"body": 2, **other}]})
    [*peeked] = (await call("POST", M + "/peek", {"batch_size": 10}))["messages"]
    assert {m["message_group_id"] for m in peeked} == {"g", "h"}
    pulled = (await call("POST", M + "/pull", {"batch_size": 10}))["messages"]
    assert all(isinstance(m["sequence_number"], int) for m in pulled) and len(pulled) == 2


def test_the_documented_fifo_id_pattern_is_the_producers():
    from ocd.http.cloudflare.schemas import FIFO_ID_PATTERN
    from ocd.producer import _FIFO_ID

    assert FIFO_ID_PATTERN == f"^{_FIFO_ID.pattern}$"
    props = DOC["components"]["schemas"]["MessageInput"]["properties"]
    assert props["message_group_id"]["pattern"] == FIFO_ID_PATTERN
