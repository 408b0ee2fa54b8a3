"""KV namespaces in the store, on every backend: the ``Kv`` facet's rules (``ocd.store.base``)
with time passed in, so expiry is tested without waiting."""

from __future__ import annotations

import pytest

from ocd.store import KvEntry, KvNamespace
from ocd.store.values import prefix_end
from tests.store.conftest import T0

NS = KvNamespace("local", "ns-1")


async def test_put_get_replace_and_delete(store):
    assert await store.kv_get(NS, "k", T0) is None
    await store.kv_put(NS, "k", KvEntry(b"one", None, '{"v":1}'))
    assert await store.kv_get(NS, "k", T0) == KvEntry(b"one", None, '{"v":1}')
    await store.kv_put(NS, "k", KvEntry(b"two"))  # a put without metadata leaves none
    assert await store.kv_get(NS, "k", T0) == KvEntry(b"two", None, None)
    await store.kv_delete(NS, "k")
    assert await store.kv_get(NS, "k", T0) is None
    await store.kv_delete(NS, "k")  # deleting a missing key is no error


async def test_namespaces_and_accounts_are_apart(store):
    await store.kv_put(NS, "k", KvEntry(b"a"))
    assert await store.kv_get(KvNamespace("local", "ns-2"), "k", T0) is None
    assert await store.kv_get(KvNamespace("other", "ns-1"), "k", T0) is None
    page = await store.kv_list(KvNamespace("local", "ns-2"), T0, "", None, 10)
    assert page.keys == [] and page.complete


async def test_binary_and_empty_values_round_trip(store):
    blob = bytes(range(256)) * 1000
    await store.kv_put(NS, "blob", KvEntry(blob))
    await store.kv_put(NS, "empty", KvEntry(b""))
    assert (await store.kv_get(NS, "blob", T0)).value == blob
    assert (await store.kv_get(NS, "empty", T0)).value == b""


async def test_expired_keys_are_invisible_at_once_then_swept(store):
    await store.kv_put(NS, "short", KvEntry(b"s", T0 + 60_000))
    await store.kv_put(NS, "long", KvEntry(b"l", T0 + 120_000))
    assert (await store.kv_get(NS, "short", T0 + 59_999)).value == b"s"
    assert await store.kv_get(NS, "short", T0 + 60_000) is None
    page = await store.kv_list(NS, T0 + 60_000, "", None, 10)
    assert [k.name for k in page.keys] == ["long"]
    assert page.keys[0].expires_ms == T0 + 120_000
    assert await store.kv_expire(T0 + 60_000) == 1
    assert await store.kv_expire(T0 + 60_000) == 0
    assert (await store.kv_get(NS, "long", T0 + 60_000)).value == b"l"


async def test_list_is_in_byte_order_with_prefix_and_pages(store):
    names = ["b", "a/2", "a/1", "a/10", "ab", "a", "é", "z", "a/\U0001f600"]
    for n in names:
        await store.kv_put(NS, n, KvEntry(n.encode(), None, '"m"' if n == "ab" else None))
    page = await store.kv_list(NS, T0, "", None, 100)
    assert [k.name for k in page.keys] == sorted(names, key=lambda n: n.encode())
    assert page.complete
    got: list[str] = []
    after = None
    while True:
        page = await store.kv_list(NS, T0, "a/", after, 2)
        got += [k.name for k in page.keys]
        if page.complete:
            break
        after = page.keys[-1].name
    assert got == ["a/1", "a/10", "a/2", "a/\U0001f600"]
    page = await store.kv_list(NS, T0, "ab", None, 1)
    assert page.keys[0].metadata == '"m"' and page.complete


async def test_a_full_page_ending_the_listing_is_complete(store):
    for n in ("x1", "x2"):
        await store.kv_put(NS, n, KvEntry(b""))
    page = await store.kv_list(NS, T0, "x", None, 2)
    assert [k.name for k in page.keys] == ["x1", "x2"] and page.complete


async def test_keys_survive_a_restart(open_store):
    s = await open_store()
    await s.kv_put(NS, "k", KvEntry(b"kept", T0 + 3_600_000, "{}"))
    await s.close()
    s2 = await open_store(T0 + 5)
    assert await s2.kv_get(NS, "k", T0 + 5) == KvEntry(b"kept", T0 + 3_600_000, "{}")


@pytest.mark.parametrize(
    ("prefix", "end"),
    [("", None), ("a", "b"), ("a\U0010ffff", "b"), ("\U0010ffff", None), ("x\ud7ff", "x\ue000")],
)
def test_prefix_end_bounds_every_key_with_the_prefix(prefix, end):
    assert prefix_end(prefix) == end
