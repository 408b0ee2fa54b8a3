"""Property-based fuzzing of the API's mutating endpoints against a real daemon.

For arbitrary bodies (valid ones, near-valid mutations of them, arbitrary JSON, arbitrary
bytes, huge and deeply nested values) every response must be:

* never a 5xx;
* Cloudflare's envelope, matching the OpenAPI document's schema for that status (so a 4xx
  carries ``success: false`` and one of the error codes documented for it);
* on a 4xx, without effect: the set of queues, the target queue's backlog, readiness and
  pull consumer are exactly as before;
* on a 2xx, for a body the documented request schema accepts: the document never says
  "invalid" about a request the handler takes.

The clock is frozen, so nothing changes between two requests unless a request changes it.
Examples are derandomized: every run tries the same bodies.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ocd.http.cloudflare.app import PREFIX
from ocd.http.cloudflare.context import QUEUE_NAME
from ocd.pull import MAX_WAIT_MS
from tests.helpers import FakeClock
from tests.integration.conftest import Running
from tests.integration.deep_json import Deep, dumps
from tests.openapi_schemas import operation, problems, request_validator, response_validator

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# ---------------------------------------------------------------- values

LEAF = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and ±Infinity are sent as Python's json writes them
    | st.text(max_size=20)
)
JSON = st.recursive(
    LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


DEEP = st.builds(
    Deep,
    st.sampled_from([30, 500, 900, 960, 990, 1000, 1100, 5000, 100_000]),
    st.sampled_from(["list", "dict"]),
)
HUGE = st.sampled_from([1_000, 64_000, 130_000, 260_000, 1_100_000]).map(lambda n: "x" * n)
NUMBERS = st.sampled_from(
    [-(10**30), -1, 0, 1, 59, 60, 100, 101, 20_000, 20_001, 86_400, 86_401, 1_209_600,
     1_209_601, 43_200_000, 43_200_001, 2**31, 2**63, 10**30, 0.5, 1.0, 100.0, 1e300, -0.0]
)  # fmt: skip
WRONG_TYPES = st.sampled_from(
    [None, True, False, "", "5", "true", "http_pull", [], {}, [1], {"a": 1}]
)
GARBAGE = st.one_of(JSON, NUMBERS, WRONG_TYPES, HUGE, DEEP)
RAW = st.binary(max_size=64) | st.sampled_from(
    [b"", b" ", b"\n\t ", b"{", b'{"a":}', b"\xff\xfe{}", b"null", b"[]", b'"s"', b"1", b"{}",
     b"{}{}", b'{"a": NaN}', b'{"a": 1e999}', b"\x00", b'{"a": "\\ud800"}', b"1" * 5000]
)  # fmt: skip

WIRE = ["plain"] * 8 + ["gzip", "gzip-lie"]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*at, i))
    return found


def _replace(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    if not at:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[at[0]] = _replace(value[at[0]], at[1:], new)
    return copy


@st.composite
def _changed(draw: st.DrawFn, node: Any) -> Any:
    """``node`` with one thing wrong: a key unknown or gone, an item added or gone, or the
    whole node replaced by garbage."""
    options = ["garbage"]
    if isinstance(node, dict):
        options += ["unknown key"] + (["drop key"] if node else [])
    if isinstance(node, list):
        options += ["append", "many"] + (["drop item"] if node else [])
    how = draw(st.sampled_from(options))
    if how == "unknown key":
        return {**node, draw(st.text(max_size=8) | st.just("~/a")): draw(GARBAGE)}
    if how == "drop key":
        key = draw(st.sampled_from(sorted(node)))
        return {k: v for k, v in node.items() if k != key}
    if how == "append":
        return [*node, draw(GARBAGE)]
    if how == "many":
        return (node or [None]) * draw(st.sampled_from([26, 101, 150]))
    if how == "drop item":
        i = draw(st.integers(0, len(node) - 1))
        return node[:i] + node[i + 1 :]
    return draw(GARBAGE)


@st.composite
def near(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """A valid body with one to three mutations somewhere inside it."""
    body = draw(valid)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.sampled_from(_paths(body)))
        node = body
        for step in at:
            node = node[step]
        body = _replace(body, at, draw(_changed(node)))
    return body


def bodies(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[str, Any]]:
    return st.one_of(
        st.tuples(st.just("valid"), valid),
        st.tuples(st.just("near-valid"), near(valid)),
        st.tuples(st.just("near-valid"), near(valid)),
        st.tuples(st.just("near-valid"), near(valid)),
        st.tuples(st.just("json"), GARBAGE | st.dictionaries(st.text(max_size=12), GARBAGE)),
        st.tuples(st.just("bytes"), RAW),
    )


# ---------------------------------------------------------------- valid bodies


def ints(lo: int, hi: int) -> st.SearchStrategy[Any]:
    return st.integers(lo, hi) | st.integers(lo, hi).map(float)  # JSON's 5.0 is 5


def some(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


NAME = st.from_regex(QUEUE_NAME, fullmatch=True)
DELAY = ints(0, 86_400) | st.none()
SETTINGS = some(
    delivery_delay=ints(0, 86_400),
    message_retention_period=ints(60, 1_209_600),
    delivery_paused=st.booleans(),
    # FIFO queues' own: refused on a standard queue unless they hold their defaults
    content_based_deduplication=st.booleans(),
    deduplication_scope=st.sampled_from(["queue", "message_group", None]),
)
QUEUE_CREATE = st.fixed_dictionaries(
    {"queue_name": NAME}, optional={"settings": SETTINGS | st.none(), "jurisdiction": JSON}
)
QUEUE_CHANGE = some(queue_name=NAME | st.none(), settings=SETTINGS | st.none())
CONSUMER = some(
    type=st.sampled_from(["http_pull", None]),
    dead_letter_queue=NAME | st.sampled_from(["", None]),
    settings=some(
        batch_size=ints(1, 100),
        max_retries=ints(0, 100),
        visibility_timeout_ms=ints(1, 43_200_000),
        retry_delay=ints(0, 86_400),
    ),
    script_name=JSON,
)
MESSAGE = st.fixed_dictionaries(
    {"body": JSON},
    optional={"content_type": st.sampled_from(["json", None]), "delay_seconds": DELAY},
) | st.fixed_dictionaries(
    {"body": st.text(), "content_type": st.just("text")}, optional={"delay_seconds": DELAY}
)
BATCH = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGE, min_size=1, max_size=5)}, optional={"delay_seconds": DELAY}
)
PULL = some(
    batch_size=ints(1, 100),
    visibility_timeout_ms=ints(1, 43_200_000),
    visibility_timeout=ints(1, 43_200_000),
    wait_ms=st.just(0),
)
PEEK = some(batch_size=ints(1, 100))
QUEUE_PURGE = st.just({"delete_messages_permanently": True})


def acks(leases: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    lease = st.sampled_from(leases) | st.text(max_size=40)
    return some(
        acks=st.lists(st.fixed_dictionaries({"lease_id": lease}), max_size=3),
        retries=st.lists(
            st.fixed_dictionaries({"lease_id": lease}, optional={"delay_seconds": DELAY}),
            max_size=3,
        ),
    )


def refs(known: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    ref = st.sampled_from(known) | st.text(max_size=40)
    return st.fixed_dictionaries(
        {"refs": st.lists(st.fixed_dictionaries({"ref": ref}), max_size=3)}
    )


# ---------------------------------------------------------------- the daemon under fuzz

Q = "/accounts/{account_id}/queues"
ONE = Q + "/{queue_id}"
M = ONE + "/messages"
CONSUMERS = ONE + "/consumers"


class World:
    """A daemon with a frozen clock; queue ``work`` has a pull consumer, messages, live
    leases and refs; queue ``bare`` has no consumer."""

    def __init__(self, running: Running) -> None:
        self.running = running
        self.work = ""  # queue ids
        self.bare = ""
        self.leases: list[str] = []
        self.refs: list[str] = []

    async def request(
        self, method: str, path: str, data: bytes | None, encoding: str | None = None
    ) -> tuple[int, Any]:
        url = self.running.base + PREFIX + path
        headers = {"Content-Type": "application/json"}
        if encoding is not None:
            headers["Content-Encoding"] = encoding
        payload = None if data is None else io.BytesIO(data)  # aiohttp warns on big raw bytes
        async with self.running.session.request(method, url, data=payload, headers=headers) as r:
            text = await r.text()
            assert r.content_type == "application/json", (r.status, text[:500])
            return r.status, json.loads(text)

    async def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, out = await self.request(method, path, None if body is None else dumps(body))
        assert status == 200, (method, path, out)
        return out["result"]

    async def state(self, queue_id: str) -> tuple[Any, ...]:
        store = self.running.daemon.store
        queues = sorted(store.queues(), key=lambda q: q.queue_id)
        q = store.queue_by_id(queue_id)
        if q is None:
            return (queues,)
        now = self.running.daemon.clock()
        return (
            queues,
            await store.backlog(q),
            await store.ready(q, now, 1_000_000),
            store.pull_consumer(q),
        )

    async def refill(self) -> None:
        await self.ok(
            "POST",
            self.path(M, self.work) + "/batch",
            {"messages": [{"body": i} for i in range(5)]},
        )

    def path(self, template: str, queue_id: str) -> str:
        # a PUT to a consumer id the queue does not have creates its consumer
        return template.format(account_id="local", queue_id=queue_id, consumer_id="0" * 32)

    def __repr__(self) -> str:
        return f"World(work={self.work}, bare={self.bare})"


@pytest.fixture
async def world(start_daemon: Callable[..., Awaitable[Running]]) -> World:
    running = await start_daemon(clock=FakeClock())
    w = World(running)
    w.work = (await w.ok("POST", Q.format(account_id="local"), {"queue_name": "work"}))["queue_id"]
    w.bare = (await w.ok("POST", Q.format(account_id="local"), {"queue_name": "bare"}))["queue_id"]
    await w.ok("POST", w.path(CONSUMERS, w.work), {"type": "http_pull"})
    for _ in range(4):
        await w.refill()
    pulled = await w.ok("POST", w.path(M, w.work) + "/pull", {"batch_size": 6})
    w.leases = [m["lease_id"] for m in pulled["messages"]]
    peeked = await w.ok("POST", w.path(M, w.work) + "/peek", {"batch_size": 6})
    w.refs = [m["ref"] for m in peeked["messages"]]
    assert len(w.leases) == 6 and len(w.refs) == 6
    return w


async def _delete_consumer(w: World, queue_id: str) -> None:
    (c,) = await w.ok("GET", w.path(CONSUMERS, queue_id))
    await w.ok("DELETE", w.path(CONSUMERS, queue_id) + "/" + c["consumer_id"])


@dataclass(frozen=True)
class Endpoint:
    method: str
    template: str  # as in the OpenAPI document
    queue: str  # "work" or "bare": the queue in the path, whose state is compared
    valid: Callable[[World], st.SearchStrategy[Any]]
    after_success: Callable[[World], Awaitable[None]] | None = None


async def _new_consumer_again(w: World) -> None:
    await _delete_consumer(w, w.bare)  # so the next example is validated, not refused as 409


ENDPOINTS = {
    "queue create": Endpoint("POST", Q, "work", lambda w: QUEUE_CREATE),
    "queue update": Endpoint("PUT", ONE, "work", lambda w: QUEUE_CHANGE),
    "queue edit": Endpoint("PATCH", ONE, "work", lambda w: QUEUE_CHANGE),
    "queue purge": Endpoint(
        "POST", ONE + "/purge", "work", lambda w: QUEUE_PURGE, after_success=World.refill
    ),
    "consumer create": Endpoint(
        "POST", CONSUMERS, "bare", lambda w: CONSUMER, after_success=_new_consumer_again
    ),
    "consumer update": Endpoint(
        "PUT",
        CONSUMERS + "/{consumer_id}",
        "bare",
        lambda w: CONSUMER,
        after_success=_new_consumer_again,
    ),
    "push": Endpoint("POST", M, "work", lambda w: MESSAGE),
    "batch push": Endpoint("POST", M + "/batch", "work", lambda w: BATCH),
    "pull": Endpoint("POST", M + "/pull", "work", lambda w: PULL),
    "ack": Endpoint("POST", M + "/ack", "work", lambda w: acks(w.leases)),
    "peek": Endpoint("POST", M + "/peek", "work", lambda w: PEEK),
    "purge peeked": Endpoint("POST", M + "/purge", "work", lambda w: refs(w.refs)),
}


def _no_long_poll(body: Any) -> Any:
    """A valid wait_ms would hold a pull on an empty queue up to 20 s; fuzz the parsing of
    wait_ms, not the waiting."""
    if isinstance(body, dict):
        wait = body.get("wait_ms")
        if isinstance(wait, int | float) and not isinstance(wait, bool) and 0 < wait <= MAX_WAIT_MS:
            return {**body, "wait_ms": 0}
    return body


ABSENT: Any = object()


def _parse(raw: bytes) -> tuple[bool, Any]:
    """(parsed, value) as the handlers' JSON reader sees ``raw``: blank is ABSENT, and
    NaN and Infinity are not JSON."""
    if not raw.strip():
        return True, ABSENT
    try:
        return True, json.loads(raw, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return False, None


def _not_json(name: str) -> Any:
    raise ValueError(name)


@pytest.mark.parametrize("name", list(ENDPOINTS))
@FUZZ
@given(data=st.data())
async def test_bodies_never_5xx_and_rejections_change_nothing(world: World, name: str, data: Any):
    ep = ENDPOINTS[name]
    kind, body = data.draw(bodies(ep.valid(world)), label="body")
    raw = body if kind == "bytes" else dumps(_no_long_poll(body) if name == "pull" else body)
    queue_id = world.work if ep.queue == "work" else world.bare
    path = world.path(ep.template, queue_id)

    wire = data.draw(st.sampled_from(WIRE), label="wire")
    if wire == "gzip":
        raw = gzip.compress(raw)
    encoding = None if wire == "plain" else "gzip"  # "gzip-lie": the header but plain bytes

    before = await world.state(queue_id)
    status, out = await world.request(ep.method, path, raw, encoding)
    shown = f"{ep.method} {path} {wire} {raw[:300]!r} -> {status} {json.dumps(out)[:500]}"
    code = out.get("errors") and out["errors"][0].get("code") if isinstance(out, dict) else None
    event(f"{kind} -> {status} {code or ''}")  # see --hypothesis-show-statistics

    assert status < 500, shown
    assert isinstance(out, dict) and set(out) >= {"success", "errors", "messages", "result"}, shown
    validator = response_validator(ep.method, ep.template, status)
    assert validator is not None, f"undocumented status: {shown}"
    assert problems(validator, out) == [], shown
    if status >= 400:
        assert out["success"] is False and out["errors"][0]["code"] >= 1000, shown
        assert await world.state(queue_id) == before, f"a rejected request changed state: {shown}"
        return

    assert out["success"] is True, shown
    if wire == "gzip-lie":
        # aiohttp reads a "gzip" body too short to hold a gzip header (one byte) as empty;
        # anything longer that is not gzip is a 400
        parsed, value = True, ABSENT
    else:
        parsed, value = _parse(gzip.decompress(raw) if wire == "gzip" else raw)
    request = request_validator(ep.method, ep.template)
    assert parsed and request is not None, shown
    if value is ABSENT:
        required = operation(ep.method, ep.template)["requestBody"]["required"]
        assert not required, f"accepted without a body, which the document requires: {shown}"
    else:
        assert problems(request, value) == [], f"accepted a body the document rejects: {shown}"
    if ep.after_success is not None:
        await ep.after_success(world)
