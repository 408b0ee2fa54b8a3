from __future__ import annotations

import array
import io
import json
import math
import re
import uuid
from collections import OrderedDict, deque, namedtuple
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocd.codec import CONTENT_TYPES, V8_MAX_DEPTH, decode, encode, normalize_content_type

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def v8_round_trip(value: object) -> Any:
    return decode(encode(value, "v8"), "v8")


def assert_same(got: object, expected: object) -> None:
    """Equal, with the same types all the way down; nan equals nan, -0.0 is not 0.0."""
    assert type(got) is type(expected), (got, expected)
    if isinstance(expected, float):
        assert isinstance(got, float)
        if math.isnan(expected):
            assert math.isnan(got)
        else:
            assert got == expected
            assert math.copysign(1, got) == math.copysign(1, expected)
    elif isinstance(expected, complex):
        assert isinstance(got, complex)
        assert_same(got.real, expected.real)
        assert_same(got.imag, expected.imag)
    elif isinstance(expected, list | tuple):
        assert isinstance(got, list | tuple)
        assert len(got) == len(expected)
        for got_item, expected_item in zip(got, expected, strict=True):
            assert_same(got_item, expected_item)
    elif isinstance(expected, dict):
        assert isinstance(got, dict)
        assert len(got) == len(expected)
        for (got_key, got_value), (key, value) in zip(got.items(), expected.items(), strict=True):
            assert_same(got_key, key)
            assert_same(got_value, value)
    elif isinstance(expected, set | frozenset):
        assert isinstance(got, set | frozenset)
        assert got == expected
        by_value = {item: item for item in got}
        for item in expected:
            assert_same(by_value[item], item)
    elif isinstance(expected, datetime):
        assert isinstance(got, datetime)
        assert (got.tzinfo is None) == (expected.tzinfo is None)
        assert got.utcoffset() == expected.utcoffset()
        assert got == expected
    elif isinstance(expected, Decimal):
        assert str(got) == str(expected)  # same digits and exponent, not only equal
    else:
        assert got == expected


# normalize_content_type ----------------------------------------------------------------------


def test_content_types_are_the_four_cloudflare_names() -> None:
    assert CONTENT_TYPES == ("json", "text", "bytes", "v8")


def test_none_means_json() -> None:
    assert normalize_content_type(None) == "json"


@pytest.mark.parametrize(
    ("given", "expected"),
    [("json", "json"), ("JSON", "json"), ("Text", "text"), ("bYtEs", "bytes"), ("V8", "v8")],
)
def test_content_type_is_case_insensitive(given: str, expected: str) -> None:
    assert normalize_content_type(given) == expected


@pytest.mark.parametrize(
    ("given", "shown"),
    [("XML", "XML"), ("", ""), (" json", " json"), ("application/json", "application/json"),
     (5, "5"), (True, "True"), (b"json", "b'json'"), (["json"], "['json']")],
)  # fmt: skip
def test_unknown_content_type_names_the_value_as_given(given: object, shown: str) -> None:
    with pytest.raises(TypeError) as caught:
        normalize_content_type(given)
    assert str(caught.value) == f"Unsupported queue message content type: {shown}"


def test_encode_and_decode_refuse_unknown_content_types() -> None:
    with pytest.raises(TypeError, match=r"^Unsupported queue message content type: xml$"):
        encode("x", "xml")
    with pytest.raises(ValueError, match=r"^Unsupported queue message content type: xml$"):
        decode(b"x", "xml")


# json ----------------------------------------------------------------------------------------

JSON_ERROR = 'Content Type "json" requires a JSON-serializable value, but received: '
JSON_ERROR_RE = re.escape(JSON_ERROR)


def test_json_is_compact_utf8() -> None:
    body = {"a": [1, 2.5, None, True], "b": "é€😀", "c": {}}
    data = encode(body, "json")
    assert data == '{"a":[1,2.5,null,true],"b":"é€😀","c":{}}'.encode()
    assert decode(data, "json") == body


@pytest.mark.parametrize("body", [None, True, 0, -7, 2**80, 1.5, -0.0, "", "plain", [], {}])
def test_json_scalars_round_trip(body: object) -> None:
    assert_same(decode(encode(body, "json"), "json"), body)


def test_json_tuples_come_back_as_lists() -> None:
    assert decode(encode({"t": (1, (2, 3))}, "json"), "json") == {"t": [1, [2, 3]]}


def test_json_size_is_the_utf8_length_of_the_serialised_text() -> None:
    body = {"name": "Zoë", "emoji": "😀", "n": [1, 2, 3]}
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    assert len(encode(body, "json")) == len(text.encode("utf-8")) > len(text)


def test_json_lone_surrogates_are_escaped_like_json_stringify() -> None:
    data = encode({"s": "a\ud800b"}, "json")
    assert data == b'{"s":"a\\ud800b"}'
    assert decode(data, "json") == {"s": "a\ud800b"}


@pytest.mark.parametrize(
    ("body", "typename"),
    [
        (b"raw", "bytes"),
        (bytearray(b"raw"), "bytearray"),
        ({1, 2}, "set"),
        (object(), "object"),
        (datetime(2024, 1, 1), "datetime"),
        (Decimal("1.5"), "Decimal"),
        (len, "builtin_function_or_method"),
        ([1, {"deep": [b"x"]}], "bytes"),
        ({"when": date(2024, 1, 1)}, "date"),
    ],
)
def test_json_rejects_values_json_cannot_hold(body: object, typename: str) -> None:
    with pytest.raises(TypeError) as caught:
        encode(body, "json")
    assert str(caught.value) == JSON_ERROR + typename


@pytest.mark.parametrize(
    ("body", "typename"),
    [
        ({1: "a"}, "int"),
        ({1.5: "a"}, "float"),
        ({True: "a"}, "bool"),
        ({None: "a"}, "NoneType"),
        ({(1, 2): "a"}, "tuple"),
        ({"ok": [{"nested": {2: "x"}}]}, "int"),
        ([{"a": 1}, ({frozenset(): 1},)], "frozenset"),
    ],
)
def test_json_rejects_non_string_keys(body: object, typename: str) -> None:
    with pytest.raises(TypeError) as caught:
        encode(body, "json")
    assert str(caught.value) == JSON_ERROR + typename


@pytest.mark.parametrize("body", [math.nan, math.inf, -math.inf, [1.0, math.nan], {"x": math.inf}])
def test_json_rejects_nan_and_infinity(body: object) -> None:
    with pytest.raises(TypeError, match=f"^{JSON_ERROR_RE}.*not JSON compliant"):
        encode(body, "json")


def test_json_rejects_circular_values() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(TypeError, match=f"^{JSON_ERROR_RE}list .*Circular"):
        encode(loop, "json")


def test_json_names_the_bad_value_even_inside_a_cycle() -> None:
    loop: dict[str, object] = {"bad": object()}
    loop["self"] = loop
    with pytest.raises(TypeError) as caught:
        encode(loop, "json")
    assert str(caught.value) == JSON_ERROR + "object"


def test_json_rejects_absurd_nesting_with_a_type_error() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(TypeError, match=f"^{JSON_ERROR_RE}list"):
        encode(deep, "json")


@pytest.mark.parametrize("data", [b"", b"{", b"{'a': 1}", b"[1,]", b"\xff\xfe", b"nul"])
def test_json_decode_of_corrupt_data_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data, "json")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=25,
)


@PROPERTY
@given(json_values)
def test_json_round_trips(body: object) -> None:
    data = encode(body, "json")
    assert_same(decode(data, "json"), body)
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    assert len(data) == len(text.encode("utf-8"))


# text ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["", "hello", "Zoë 😀 日本", "line\nbreak\x00nul"])
def test_text_round_trips_and_is_measured_in_utf8(body: str) -> None:
    data = encode(body, "text")
    assert data == body.encode("utf-8")
    assert len(data) == len(body.encode("utf-8"))
    assert_same(decode(data, "text"), body)


@pytest.mark.parametrize(
    ("body", "typeof"),
    [
        (True, "boolean"),
        (False, "boolean"),
        (0, "number"),
        (2**80, "number"),
        (1.5, "number"),
        (math.nan, "number"),
        (None, "object"),
        ({}, "object"),
        ([], "object"),
        (("a",), "object"),
        (b"text", "object"),
        (bytearray(b"text"), "object"),
        ({"a"}, "object"),
        (object(), "object"),
        (Decimal(1), "object"),
        (len, "function"),
        (lambda: "text", "function"),
        (str, "function"),
    ],
)
def test_text_requires_a_string(body: object, typeof: str) -> None:
    with pytest.raises(TypeError) as caught:
        encode(body, "text")
    expected = f'Content Type "text" requires a value of type string, but received: {typeof}'
    assert str(caught.value) == expected


def test_text_with_a_lone_surrogate_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="lone surrogate at index 2"):
        encode("ab\udc80", "text")


def test_text_decode_of_invalid_utf8_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode(b"\xc3\x28", "text")


# bytes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "raw"),
    [
        (b"", b""),
        (b"\x00\xffabc", b"\x00\xffabc"),
        (bytearray(b"abc"), b"abc"),
        (memoryview(b"abc"), b"abc"),
        (memoryview(b"abcdef")[::2], b"ace"),  # not contiguous
        (memoryview(array.array("H", [1, 2])), array.array("H", [1, 2]).tobytes()),
        (array.array("B", [1, 2, 3]), b"\x01\x02\x03"),
    ],
)
def test_bytes_accepts_any_buffer_and_decodes_to_bytes(body: object, raw: bytes) -> None:
    data = encode(body, "bytes")
    assert_same(data, raw)
    assert_same(decode(data, "bytes"), raw)


def test_bytes_copies_mutable_buffers() -> None:
    buffer = bytearray(b"abc")
    data = encode(buffer, "bytes")
    buffer[0] = ord("z")
    assert data == b"abc"


@pytest.mark.parametrize(
    ("body", "typeof"),
    [
        ("text", "string"),
        (1, "number"),
        (1.5, "number"),
        (True, "boolean"),
        (None, "object"),
        ([1, 2], "object"),
        ({"a": 1}, "object"),
        (object(), "object"),
        (print, "function"),
    ],
)
def test_bytes_requires_a_buffer(body: object, typeof: str) -> None:
    with pytest.raises(TypeError) as caught:
        encode(body, "bytes")
    expected = (
        'Content Type "bytes" requires a value of type ArrayBufferView, but received: ' + typeof
    )
    assert str(caught.value) == expected


# v8 ------------------------------------------------------------------------------------------

Point = namedtuple("Point", "x y")
V8_ERROR = 'Content Type "v8" cannot serialize '
V8_ERROR_RE = re.escape(V8_ERROR)
PLUS_0530 = timezone(timedelta(hours=5, minutes=30))


@pytest.mark.parametrize(
    "body",
    [
        None,
        True,
        False,
        0,
        -1,
        2**200,
        -(2**200),
        1.5,
        -0.0,
        math.inf,
        -math.inf,
        math.nan,
        1 + 2j,
        "",
        "Zoë 😀",
        b"",
        b"\x00\xff",
        bytearray(b"mutable"),
        [],
        [1, "two", [3.0]],
        (),
        (1,),
        (1, (2, (3,)), [4]),
        {},
        {"a": 1},
        {1: "int", 2.5: "float", (1, 2): "tuple", frozenset({1}): "frozenset", None: 0},
        {True: "bool key", b"k": "bytes key"},
        set(),
        {1, "a", (2, 3), frozenset({4})},
        frozenset(),
        frozenset({1, (2, frozenset({3}))}),
        datetime(2024, 2, 29, 12, 30, 15, 123456),
        datetime(2024, 2, 29, 12, 30, tzinfo=UTC),
        datetime(2024, 2, 29, 12, 30, tzinfo=PLUS_0530),
        datetime(2024, 2, 29, 12, 30, tzinfo=timezone(timedelta(seconds=-30, microseconds=7))),
        datetime(2000, 1, 1, tzinfo=timezone(timedelta(microseconds=1))),  # fromisoformat drops it
        datetime(2000, 1, 1, tzinfo=timezone(-timedelta(hours=23, minutes=59, microseconds=1))),
        datetime.min,
        datetime.max,
        date(2024, 2, 29),
        Decimal("1.50"),
        Decimal("-0"),
        Decimal("1E+1000"),
        Decimal("NaN"),
        Decimal("sNaN"),
        Decimal("-Infinity"),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        Fraction(-1, 3),
        {"nested": [({"deep": {1, 2}},), {frozenset({(1, 2)}): [bytearray(b"x")]}]},
    ],
)
def test_v8_round_trips_value_and_type(body: object) -> None:
    assert_same(v8_round_trip(body), body)


def test_v8_datetimes_keep_naive_and_aware_apart() -> None:
    naive = datetime(2024, 1, 1, 9)
    aware = datetime(2024, 1, 1, 9, tzinfo=PLUS_0530)
    got = v8_round_trip([naive, aware])
    assert got[0].tzinfo is None
    assert got[1].utcoffset() == timedelta(hours=5, minutes=30)


def test_v8_keeps_shared_references_shared() -> None:
    shared: dict[str, object] = {"x": 1}
    items = [4]
    got = v8_round_trip({"a": shared, "b": shared, "c": [items, items], "d": (items,)})
    assert got["a"] is got["b"]
    assert got["c"][0] is got["c"][1] is got["d"][0]
    got["a"]["x"] = 2
    assert got["b"]["x"] == 2


@pytest.mark.parametrize(
    "make", [dict, list, set, bytearray, lambda: (1, 2), lambda: frozenset({1})]
)
def test_v8_keeps_every_container_kind_shared(make: Any) -> None:
    value = make()
    got = v8_round_trip([value, value])
    assert got[0] is got[1]
    assert type(got[0]) is type(value)


def test_v8_list_that_contains_itself() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    got = v8_round_trip(loop)
    assert got[0] == 1
    assert got[1] is got


def test_v8_cycles_through_dicts_and_into_tuples_from_a_list() -> None:
    node: dict[str, object] = {"name": "root", "children": []}
    child = {"name": "child", "parent": node}
    node["children"] = [child, (child, node)]
    got = v8_round_trip(node)
    assert got["children"][0]["parent"] is got
    assert got["children"][1][0] is got["children"][0]
    assert got["children"][1][1] is got


def test_v8_cycle_through_a_tuple_is_refused() -> None:
    inner: list[object] = []
    cyclic = (inner,)
    inner.append(cyclic)
    with pytest.raises(TypeError, match=f"^{V8_ERROR_RE}a cycle through a tuple"):
        encode(cyclic, "v8")
    # The same graph entered through the list is fine: the list exists before its items.
    got = v8_round_trip(inner)
    assert got[0][0] is got


def nest(wrap: Any, leaf: object, levels: int) -> object:
    value = leaf
    for _ in range(levels):
        value = wrap(value)
    return value


@pytest.mark.parametrize(
    ("wrap", "leaf"),
    [
        (lambda inner: [inner], bytearray(b"leaf")),
        (lambda inner: [inner], Decimal("-0")),
        (lambda inner: {"k": inner}, datetime(2024, 1, 1)),
        (lambda inner: (inner,), Decimal("-0")),
        (lambda inner: frozenset({inner}), Decimal("-0")),
    ],
)
def test_v8_nests_up_to_the_limit_and_no_further(wrap: Any, leaf: object) -> None:
    deepest = nest(wrap, leaf, V8_MAX_DEPTH)
    assert_same(v8_round_trip(deepest), deepest)
    with pytest.raises(TypeError, match=f"^{V8_ERROR_RE}values nested more than 256 levels deep$"):
        encode(nest(wrap, leaf, V8_MAX_DEPTH + 1), "v8")


def test_v8_nesting_limit_counts_sets_and_dict_keys() -> None:
    deepest = {nest(lambda inner: (inner,), 1, V8_MAX_DEPTH - 1)}
    assert_same(v8_round_trip(deepest), deepest)
    keyed = {nest(lambda inner: (inner,), 1, V8_MAX_DEPTH): "value"}
    with pytest.raises(TypeError, match=f"^{V8_ERROR_RE}values nested more than"):
        encode(keyed, "v8")


def test_v8_refuses_nesting_that_would_crash_cbor2() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(TypeError, match=f"^{V8_ERROR_RE}values nested more than"):
        encode(deep, "v8")


@pytest.mark.parametrize(
    ("body", "typename"),
    [
        (object(), "object"),
        (lambda: 1, "function"),
        (print, "builtin_function_or_method"),
        (io.BytesIO(), "BytesIO"),
        ([1, {"a": (object(),)}], "object"),
        ({"when": timedelta(1)}, "timedelta"),
        ((n for n in range(3)), "generator"),
        (int, "type"),
    ],
)
def test_v8_refuses_values_it_cannot_clone(body: object, typename: str) -> None:
    with pytest.raises(TypeError) as caught:
        encode(body, "v8")
    assert str(caught.value) == f"{V8_ERROR}a value of type {typename}"


def test_v8_refuses_an_open_file(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("x")
    with path.open() as file, pytest.raises(TypeError) as caught:
        encode({"file": file}, "v8")
    assert str(caught.value) == f"{V8_ERROR}a value of type TextIOWrapper"


def test_v8_refuses_lone_surrogates_as_a_type_error() -> None:
    with pytest.raises(TypeError, match=f"^{V8_ERROR_RE}this value"):
        encode(["ok", "bad\ud800"], "v8")


def test_v8_subclasses_come_back_as_their_base_type() -> None:
    got = v8_round_trip([Point(1, 2), range(2), deque([1]), OrderedDict(a=1), memoryview(b"m")])
    assert_same(got, [(1, 2), (0, 1), [1], {"a": 1}, b"m"])


class SetSub(set[int]):
    pass


class FrozenSetSub(frozenset[int]):
    pass


def test_v8_set_subclasses_come_back_as_set_and_frozenset() -> None:
    frozen = FrozenSetSub({2})
    got = v8_round_trip([SetSub({1}), frozen, {frozen}, frozenset({frozen}), {frozen: 1}])
    expected = [{1}, frozenset({2}), {frozenset({2})}, frozenset({frozenset({2})})]
    assert_same(got, [*expected, {frozenset({2}): 1}])


def test_v8_shared_namedtuple_can_be_both_list_item_and_set_item() -> None:
    # A shared value decodes once; had the namedtuple gone out as a plain array it would
    # come back as a list in the list, and that same list cannot be a set item or a key.
    point = Point(1, 2)
    got = v8_round_trip([point, {point}, frozenset({point}), {point: "key"}, (point,)])
    assert_same(got, [(1, 2), {(1, 2)}, frozenset({(1, 2)}), {(1, 2): "key"}, ((1, 2),)])
    assert got[0] is got[4][0]


class FrozenMap(Mapping[str, int]):
    def __init__(self, **items: int) -> None:
        self._items = items

    def __getitem__(self, key: str) -> int:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))


def test_v8_refuses_hashable_mappings() -> None:
    with pytest.raises(TypeError) as caught:
        encode([FrozenMap(a=1)], "v8")
    assert str(caught.value) == f"{V8_ERROR}a value of type FrozenMap"


def test_v8_cycle_through_a_namedtuple_is_refused() -> None:
    inner: list[object] = []
    point = Point(inner, 0)
    inner.append(point)
    with pytest.raises(TypeError, match=f"^{V8_ERROR_RE}a cycle through a tuple"):
        encode(point, "v8")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff",
        b"\x82\x01",  # an array of two with one item
        b"\xd8\x1d\x05",  # a reference to a value never shared
        b"\x9b\x00\x00\x00\x10\x00\x00\x00\x00",  # claims 2**36 items
        b"\xda\x6f\x63\x64\x01\x01",  # tuple tag around an integer
        b"\xda\x6f\x63\x64\x03\x01",  # bytearray tag around an integer
        b"\xda\x6f\x63\x64\x04\x61x",  # datetime tag around "x"
        b"\xda\x6f\x63\x64\x04\x82\x61x\x01",  # datetime tag around ["x", 1]
        b"\xda\x6f\x63\x64\x04\x82\x60\x01",  # datetime tag around ["", 1]
        b"\xda\x6f\x63\x64\x04\x01",  # datetime tag around 1
        b"\xda\x6f\x63\x64\x05\x61x",  # Decimal tag around "x"
    ],
)
def test_v8_decode_of_corrupt_data_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"^corrupt v8 message body: "):
        decode(data, "v8")


@PROPERTY
@given(st.binary(max_size=64))
def test_v8_decode_of_arbitrary_bytes_returns_or_raises_value_error(data: bytes) -> None:
    try:
        decode(data, "v8")
    except ValueError:
        pass


offsets = st.timedeltas(
    min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
)
hashable_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.dates()
    | st.datetimes()
    | st.datetimes(timezones=st.builds(timezone, offsets))
    | st.decimals(allow_nan=False, allow_infinity=False)
    | st.uuids()
    | st.fractions()
)
hashables = st.recursive(
    hashable_leaves,
    lambda children: (
        st.lists(children, max_size=3).map(tuple) | st.frozensets(children, max_size=3)
    ),
    max_leaves=6,
)
v8_values = st.recursive(
    hashables | st.floats() | st.complex_numbers() | st.binary().map(bytearray),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.integers() | st.text() | hashables, children, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    ),
    max_leaves=20,
)


@PROPERTY
@given(v8_values)
def test_v8_round_trips(body: object) -> None:
    assert_same(v8_round_trip(body), body)
