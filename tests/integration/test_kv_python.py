"""A Python worker's ``env.KV`` (``runtime.KvNamespace``) over ocd's KV service and a real
SQLite store, with the clock injected: values by type, metadata, listing pages, expiry and
Cloudflare's limits with the texts a JS Worker sees."""

from __future__ import annotations

import pytest

import runtime
from ocd.kv import KvBinding, KvService
from ocd.store import KvNamespace, SqliteStore

T0 = 1_800_000_000_000


@pytest.fixture
async def kv(tmp_path):
    store = SqliteStore(tmp_path / "data")
    await store.open(T0)
    now = [T0]
    service = KvService(store, lambda: now[0])
    binding = runtime.KvNamespace(KvBinding(service, KvNamespace("local", "ns")))
    yield binding, now
    await store.close()


async def test_get_put_by_type_with_metadata_and_delete(kv):
    env_kv, _ = kv
    assert await env_kv.get("missing") is None
    await env_kv.put("j", '{"a": [1, 2]}', metadata={"v": 1})
    assert await env_kv.get("j") == '{"a": [1, 2]}'
    assert (await env_kv.get("j", type="json")).a == [1, 2]
    assert await env_kv.get("j", {"type": "arrayBuffer", "cacheTtl": 60}) == b'{"a": [1, 2]}'
    got = await env_kv.getWithMetadata("j", "json")
    assert got.metadata.v == 1 and got.value["a"] == [1, 2]
    await env_kv.put("b", b"\x00\xff")
    assert await env_kv.get("b", type="arrayBuffer") == b"\x00\xff"
    await env_kv.delete("j")
    assert await env_kv.get("j") is None
    with pytest.raises(TypeError, match="KV put\\(\\) accepts only strings"):
        await env_kv.put("x", 5)


async def test_list_pages_in_key_order(kv):
    env_kv, _ = kv
    for n in range(5):
        await env_kv.put(f"k{n}", "v", metadata={"n": n})
    await env_kv.put("other", "v")
    first = await env_kv.list(prefix="k", limit=3)
    assert [k.name for k in first.keys] == ["k0", "k1", "k2"] and not first.list_complete
    rest = await env_kv.list(prefix="k", cursor=first.cursor)
    assert [k.name for k in rest.keys] == ["k3", "k4"] and rest.list_complete
    assert rest.keys[1].metadata == {"n": 4}


async def test_expiration_by_the_injected_clock(kv):
    env_kv, now = kv
    await env_kv.put("ttl", "v", expirationTtl=60)
    await env_kv.put("at", "v", expiration=T0 // 1000 + 120)
    listed = await env_kv.list()
    assert {k.name: k.expiration for k in listed.keys} == {
        "at": T0 // 1000 + 120,
        "ttl": T0 // 1000 + 60,
    }
    now[0] = T0 + 59_999
    assert await env_kv.get("ttl") == "v"
    now[0] = T0 + 60_000
    assert await env_kv.get("ttl") is None
    assert [k.name for k in (await env_kv.list()).keys] == ["at"]


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda kv: kv.put("k", "v", expirationTtl=59),
         "KV PUT failed: 400 Invalid expiration_ttl of 59. Expiration TTL must be at least 60."),
        (lambda kv: kv.put("k", "v", expiration=T0 // 1000 + 30),
         f"KV PUT failed: 400 Invalid expiration of {T0 // 1000 + 30}. Expiration times must "
         "be at least 60 seconds in the future."),
        (lambda kv: kv.put("k", "v", metadata="x" * 1023),
         "KV PUT failed: 413 Metadata length of 1025 exceeds limit of 1024."),
        (lambda kv: kv.put("k", b"x" * (25 * 1024 * 1024 + 1)),
         "KV PUT failed: 413 Value length of 26214401 exceeds limit of 26214400."),
        (lambda kv: kv.get("é" * 257),
         "KV GET failed: 414 UTF-8 encoded length of 514 exceeds key length limit of 512."),
        (lambda kv: kv.delete(""), "KV DELETE failed: 400 Key names must not be empty"),
        (lambda kv: kv.list(limit=0),
         "KV GET failed: 400 Invalid key_count_limit of 0. Please specify an integer greater "
         "than 0."),
    ],
)  # fmt: skip
async def test_limits_raise_with_cloudflares_texts(kv, call, text):
    env_kv, _ = kv
    with pytest.raises(runtime.KvError) as e:
        await call(env_kv)
    assert str(e.value) == text
    assert await env_kv.get("k") is None
