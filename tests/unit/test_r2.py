"""R2's pure rules: preconditions, ranges, and a listing page with delimited prefixes."""

from __future__ import annotations

import pytest

from ocd.errors import R2Refused
from ocd.r2 import Conditional, Etag, _page, byte_range, decode_cursor
from ocd.store.sqlite.r2 import ObjectRow


def row(key: str, etag: str = "e1", uploaded_ms: int = 10_500) -> ObjectRow:
    return ObjectRow(key, "v", 1, etag, uploaded_ms, "{}", "{}", "{}", "[]")


def test_preconditions_follow_rfc_7232_as_r2_does() -> None:
    strong, weak = Etag("e1", "strong"), Etag("e1", "weak")
    assert Conditional(etag_matches=(strong,)).holds(row("k"))
    assert not Conditional(etag_matches=(weak,)).holds(row("k"))  # If-Match compares strongly
    assert not Conditional(etag_does_not_match=(weak,)).holds(row("k"))
    assert Conditional(etag_does_not_match=(Etag("", "wildcard"),)).holds(None)
    assert not Conditional(etag_matches=(strong,)).holds(None)
    assert not Conditional(uploaded_after_ms=10_400).holds(row("k", uploaded_ms=10_400))
    assert not Conditional(uploaded_after_ms=10_000, seconds=True).holds(row("k"))
    assert Conditional(uploaded_before_ms=11_000).holds(row("k"))


def test_ranges_clamp_and_refuse_as_r2_does() -> None:
    assert byte_range(10, 2, 3, None, None) == (2, 3)
    assert byte_range(10, 8, 100, None, None) == (8, 2)
    assert byte_range(10, None, None, 4, None) == (6, 4)
    assert byte_range(10, None, None, None, "bytes=3-") == (3, 7)
    assert byte_range(10, None, None, None, "bytes=0-1,4-5") == (0, 10)  # not one range
    with pytest.raises(R2Refused) as info:
        byte_range(10, 11, None, None, None)
    assert (info.value.status, info.value.v4code) == (416, 10039)


def test_a_page_groups_delimited_prefixes_and_its_cursor_skips_the_whole_group() -> None:
    keys = ["a/1", "a/2", "b", "c/1", "c/2", "d"]
    page = _page(iter(row(k) for k in keys), "", "/", 2)
    assert ([o.key for o in page.objects], page.prefixes) == (["b"], ["a/"])
    assert page.cursor is not None and decode_cursor(page.cursor) == "b"
    rest = _page(iter(row(k) for k in keys[3:]), "", "/", 2)
    assert ([o.key for o in rest.objects], rest.prefixes, rest.cursor) == (["d"], ["c/"], None)
