"""The ``v8`` content type: V8's serialization both ways, the CBOR bodies of before, and
node's ``v8.serialize`` as the reference for the bytes (node runs workerd's V8)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from collections import OrderedDict, deque, namedtuple
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocd.codec import V8_MAX_DEPTH, decode, encode
from ocd.v8 import ByIdentity
from tests import wrangler

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ERROR = 'Content Type "v8" cannot serialize '
WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
FIVE_HOURS = timezone(timedelta(hours=5))
Point = namedtuple("Point", "x y")


def round_trip(value: object) -> Any:
    data = encode(value, "v8")
    assert data[:2] == b"\xff\x0f"
    return decode(data, "v8")


def v8(hex_bytes: str) -> Any:
    return decode(bytes.fromhex(hex_bytes), "v8")


# Python to V8 and back: the type table ---------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "received"),
    [
        (None, None),
        (True, True),
        (False, False),
        (0, 0),
        (-1, -1),
        (2**31, 2**31),  # a Number past int32, written as a double
        (2**53 - 1, 2**53 - 1),
        (2**53, 2**53),  # a BigInt from here on
        (-(2**200), -(2**200)),
        (1.5, 1.5),
        (2.0, 2),  # integral Numbers are ints, as Pyodide gives them
        (-0.0, -0.0),
        (math.inf, math.inf),
        ("", ""),
        ("héllo", "héllo"),
        ("Zoë 😀", "Zoë 😀"),
        ("lone \ud800 surrogate", "lone \ud800 surrogate"),  # JS strings are UTF-16
        (b"", b""),
        (b"\x00\xff", b"\x00\xff"),
        (bytearray(b"mutable"), b"mutable"),
        (memoryview(b"view"), b"view"),
        ([], []),
        ([1, "two", [3.5]], [1, "two", [3.5]]),
        ((1, (2,)), [1, [2]]),
        ({}, {}),
        ({"a": 1, "b": {"c": None}}, {"a": 1, "b": {"c": None}}),
        ({1: "int", (1, 2): "tuple", None: 0}, {1: "int", (1, 2): "tuple", None: 0}),
        ({frozenset({1}): "set key"}, {frozenset({1}): "set key"}),
        ({1, "a", (2, 3)}, {1, "a", (2, 3)}),
        (frozenset({4}), {4}),
        (WHEN, WHEN),
        (datetime(2024, 2, 29, 12, 30, 15, 123456, tzinfo=UTC),) * 2,  # microseconds kept
        (datetime(2024, 1, 1, 9), datetime(2024, 1, 1, 9, tzinfo=UTC)),  # naive is UTC
        (datetime(2024, 1, 1, 9, tzinfo=FIVE_HOURS), datetime(2024, 1, 1, 4, tzinfo=UTC)),
        ([Point(1, 2), range(2), deque([1]), OrderedDict(a=1)], [[1, 2], [0, 1], [1], {"a": 1}]),
    ],
)  # fmt: skip
def test_python_values_come_back_as_the_table_says(sent: object, received: object) -> None:
    got = round_trip(sent)
    assert got == received
    assert type(got) is type(received)
    if isinstance(received, float):
        assert math.copysign(1, got) == math.copysign(1, received)
    if isinstance(received, datetime):
        assert got.tzinfo is UTC


def test_a_dict_with_only_str_keys_is_a_plain_object_else_a_map() -> None:
    assert encode({"a": 1}, "v8") == bytes.fromhex("ff0f6f22016149027b01")  # workerd's {a:1}
    assert encode({1: 1}, "v8")[2:3] == b";"  # a Map
    assert encode({"a": 1, 2: 2}, "v8")[2:3] == b";"


def test_bytes_are_a_uint8array_as_workerd_writes_it() -> None:
    assert encode(b"\x01\x02\x03", "v8") == bytes.fromhex("ff0f42030102035642000300")


def test_large_ints_become_bigints_and_nan_stays_nan() -> None:
    assert encode(2**70, "v8") == bytes.fromhex("ff0f5a20" + "00" * 8 + "40" + "00" * 7)
    assert math.isnan(round_trip(math.nan))


@pytest.mark.parametrize(
    ("body", "typename"),
    [
        (object(), "object"),
        (lambda: 1, "function"),
        (Decimal("1.1"), "Decimal"),
        (date(2024, 1, 1), "date"),
        (1 + 2j, "complex"),
        ([1, {"a": (object(),)}], "object"),
        ({"when": timedelta(1)}, "timedelta"),
        ((n for n in range(3)), "generator"),
    ],
)
def test_values_structured_clone_cannot_carry_are_a_type_error(body: object, typename: str) -> None:
    with pytest.raises(TypeError) as caught:
        encode(body, "v8")
    assert str(caught.value) == f"{ERROR}a value of type {typename}"


def nest(wrap: Any, levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = wrap(value)
    return value


@pytest.mark.parametrize(
    "wrap", [lambda inner: [inner], lambda inner: {"k": inner}, lambda inner: {1: inner}]
)
def test_nesting_up_to_the_limit_and_no_further(wrap: Any) -> None:
    deepest = nest(wrap, V8_MAX_DEPTH)
    assert round_trip(deepest) == deepest
    with pytest.raises(TypeError, match=f"^{ERROR}values nested more than 256 levels deep$"):
        encode(nest(wrap, V8_MAX_DEPTH + 1), "v8")
    deeper = b"\xff\x0f" + b"A\x01" * (V8_MAX_DEPTH + 1) + b"I\x00" + b"$\x00\x01" * 257
    with pytest.raises(ValueError, match="nested more than 256 levels deep"):
        decode(deeper, "v8")


def test_very_deep_nesting_is_refused_without_a_crash() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(TypeError, match="nested more than"):
        encode(deep, "v8")


def test_the_size_is_the_encoded_bytes() -> None:
    body = {"hello": "world", "n": 1}
    assert len(encode(body, "v8")) == 24


# Shared and cyclic references -------------------------------------------------------------------


def test_shared_references_stay_shared() -> None:
    shared: dict[str, object] = {"x": 1}
    items = [4]
    raw = b"bytes"
    body = {"a": shared, "b": shared, "c": [items, items], "d": (items,), "r": [raw, raw]}
    got = round_trip(body)
    assert got["a"] is got["b"]
    assert got["c"][0] is got["c"][1] is got["d"][0]
    assert got["r"][0] is got["r"][1]
    got["a"]["x"] = 2
    assert got["b"]["x"] == 2


def test_cycles_through_lists_dicts_and_tuples() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    got = round_trip(loop)
    assert got[1] is got
    node: dict[str, object] = {"name": "root"}
    node["children"] = [{"parent": node}, (node,)]
    got = round_trip(node)
    assert got["children"][0]["parent"] is got
    assert got["children"][1][0] is got
    inner: list[object] = []
    through_tuple = (inner,)
    inner.append(through_tuple)  # refused as CBOR; an Array is built before its items
    got = round_trip(through_tuple)
    assert got[0][0] is got


def test_map_keys_python_cannot_hash_come_back_by_identity() -> None:
    key = {"an": "object"}
    got = round_trip({ByIdentity(key): 1, "k": {ByIdentity(key)}})
    (wrapped, value), (_, members) = got.items()
    assert isinstance(wrapped, ByIdentity) and wrapped.value == key and value == 1
    assert members == {wrapped}
    assert next(iter(members)).value is wrapped.value  # the same object both times


def test_a_set_holding_itself() -> None:
    # JS: const s = new Set(); s.add(s)
    got = v8("ff0f275e002c01")
    (member,) = got
    assert isinstance(member, ByIdentity) and member.value is got


def test_an_array_keying_a_map_inside_itself_is_not_copied_half_read() -> None:
    # JS: const l = [1]; l.push(new Map([[l, 2]]))
    got = v8("ff0f410249023b5e0049043a02240002")
    ((key, value),) = got[1].items()
    assert isinstance(key, ByIdentity) and key.value is got and value == 2


# From JavaScript: what workerd and node write ----------------------------------------------------


@pytest.mark.parametrize(
    ("hex_bytes", "expected"),
    [
        ("ff0f6f22016149027b01", {"a": 1}),  # workerd's {a:1}
        ("ff0f42030102035642000300", b"\x01\x02\x03"),  # workerd's Uint8Array([1,2,3])
        ("ff0f42030102035642010100", b"\x02"),  # subarray(1, 2)
        ("ff0f4208000000000000f03f5646000801", b"\x00" * 6 + b"\xf0\x3f"),  # Float64Array([1])
        ("ff0f4203010203", b"\x01\x02\x03"),  # an ArrayBuffer alone
        ("ff0f5f", None),  # undefined
        ("ff0f6f2201615f7b01", {"a": None}),  # {a: undefined}
        ("ff0f610349044906400103", [None, None, 3]),  # [, , 3]: a sparse array
        ("ff0f410249025f240002", [1, None]),
        ("ff0f6f4904220178 7b01", {"2": "x"}),  # {2: "x"}: a number key
        ("ff0f73220178", "x"),  # new String("x")
        ("ff0f6e000000000000f83f", 1.5),  # new Number(1.5)
        ("ff0f53046161c3a9", "aaé"),  # a UTF-8 string, as older writers did
        ("ff0f3b4902220161 3a02", {1: "a"}),
        ("ff0f5a11" + "01" + "00" * 7, -1),  # -1n
    ],
)
def test_reads_what_javascript_writes(hex_bytes: str, expected: object) -> None:
    got = v8(hex_bytes.replace(" ", ""))
    assert got == expected
    assert type(got) is type(expected)


def test_two_views_on_one_buffer_share_it() -> None:
    # const b = new ArrayBuffer(4); [new Uint8Array(b, 0, 2), new Uint8Array(b, 2, 2)]
    got = v8("ff0f410242040102030456420002005e015642020200240002")
    assert got == [b"\x01\x02", b"\x03\x04"]


def test_dates_are_aware_utc() -> None:
    got = round_trip(datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC))
    assert got == datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    assert got.tzinfo is UTC


@pytest.mark.parametrize(
    ("hex_bytes", "reason"),
    [
        ("ff0f44" + "000000000000f87f", "an invalid Date"),
        ("ff0f44" + "0000dcc2bbea2cc3", "outside Python's years"),  # -8.64e15: year -271821
        ("ff0f5200", "a RegExp"),
        ("ff0f5c0103010203", "host object"),  # node's Uint8Array
        ("ff10" + "5f", "version 16"),
        ("ff0f3b" "4902220161" "544904" "3a04", "equal in Python"),  # Map 1->"a", true->2
    ],
)  # fmt: skip
def test_what_python_has_no_value_for_is_a_value_error(hex_bytes: str, reason: str) -> None:
    with pytest.raises(ValueError, match=r"^v8 message body not readable in Python: ") as caught:
        v8(hex_bytes)
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    "hex_bytes",
    [
        "ff",
        "ff0f",
        "ff0f6f",  # an object never closed
        "ff0f6f22016149027b02",  # says two properties, has one
        "ff0f41054902240005",  # says five items, has one
        "ff0f22056162",  # a string shorter than announced
        "ff0f5e00",  # a reference to nothing read yet
        "ff0f5642000000",  # a view without its buffer
        "ff0f42020102564200030000",  # a view past its buffer
        "ff0f4204010203045677010300",  # an Int16Array of odd length
        "ff0f6301 41",  # a two-byte string of odd length
        "ff0f4e0000",  # a double cut short
        "ff0f5f5f",  # bytes after the value
        "ff0f01",  # an unknown tag
        "ff0f41ffffffff0f",  # an array longer than the body
        "ff0f4180808080808080808080808001",  # a varint past 64 bits
        "ff0f6f4e000000000000f83f5f7b01ff",  # a double key, then garbage
    ],
)
def test_corrupt_v8_is_a_value_error(hex_bytes: str) -> None:
    with pytest.raises(ValueError, match=r"^corrupt v8 message body: "):
        v8(hex_bytes.replace(" ", ""))


@PROPERTY
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_value_error(data: bytes) -> None:
    try:
        decode(b"\xff\x0f" + data, "v8")
    except ValueError:
        pass


# The CBOR bodies stored before ----------------------------------------------------------------

# What ocd's CBOR encoder wrote for {"t": (1, 2), "fs": frozenset({3}), "ba": bytearray(b"x"),
# "naive": datetime(2024, 1, 2, 3, 4, 5), "dec": Decimal("1.10"), 7: "int key", "a": shared,
# "b": shared} with shared = [1].
LEGACY = (
    "d81ca86174d81cda6f636401820102626673d81cda6f6364028103626261d81cda6f6364034178656e6169"
    "7665da6f63640473323032342d30312d30325430333a30343a303563646563da6f63640564312e313007"
    "67696e74206b65796161d81c81016162d81d04"
)


def test_cbor_bodies_stored_before_stay_readable_with_their_types() -> None:
    got = v8(LEGACY)
    assert got == {
        "t": (1, 2),
        "fs": frozenset({3}),
        "ba": bytearray(b"x"),
        "naive": datetime(2024, 1, 2, 3, 4, 5),
        "dec": Decimal("1.10"),
        7: "int key",
        "a": [1],
        "b": [1],
    }
    assert type(got["t"]) is tuple and type(got["ba"]) is bytearray
    assert got["a"] is got["b"]


@pytest.mark.parametrize("hex_bytes", ["", "82", "d81d05", "da6f63640401"])
def test_corrupt_cbor_is_a_value_error(hex_bytes: str) -> None:
    with pytest.raises(ValueError, match=r"^corrupt v8 message body: "):
        v8(hex_bytes)


# Round trips ----------------------------------------------------------------------------------

safe_ints = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
keys = st.none() | st.booleans() | st.integers() | st.text() | st.binary()
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False).filter(lambda x: not x.is_integer() or abs(x) > 2**53)
    | st.text()
    | st.binary()
    | st.datetimes(
        min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    )
)
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(), children, max_size=4)
        | st.dictionaries(st.integers() | st.binary(), children, max_size=4)
        | st.sets(st.integers() | st.text() | st.none(), max_size=4)
    ),
    max_leaves=20,
)


def same(got: object, sent: object) -> bool:
    """Equal, and with the types the table gives (bytes for bytes-likes, and so on)."""
    if isinstance(sent, bool) or sent is None:
        return got is sent
    if isinstance(sent, float):
        return type(got) is float and (got == sent or (math.isnan(got) and math.isnan(sent)))
    if isinstance(sent, list):
        return type(got) is list and len(got) == len(sent) and all(map(same, got, sent))
    if isinstance(sent, dict):
        return (
            type(got) is dict
            and list(got) == list(sent)
            and all(same(got[k], v) for k, v in sent.items())
        )
    return type(got) is type(sent) and got == sent


@PROPERTY
@given(values)
def test_round_trips(body: object) -> None:
    assert same(round_trip(body), body)


# Against node's v8.serialize ---------------------------------------------------------------------

# (JS expression, the Python value): node and workerd write the same bytes for these.
AGREED = [
    ("({a: 1})", {"a": 1}),
    ("'héllo'", "héllo"),
    ("'Zoë 😀'", "Zoë 😀"),
    ("({k: 'Zoë 😀', j: 'x'})", {"k": "Zoë 😀", "j": "x"}),
    ("new Map([[1, 'one'], ['k', [1, 2]]])", {1: "one", "k": [1, 2]}),
    ("new Set([1, 2, 3])", {1, 2, 3}),
    ("new Date(Date.UTC(2026, 0, 2, 3, 4, 5))", WHEN),
    ("2n ** 70n", 2**70),
    ("-(2n ** 70n)", -(2**70)),
    ("['x', 2 ** 31, -1, 1.5, true, false, null]", ["x", 2**31, -1, 1.5, True, False, None]),
    (
        "({nested: {a: [1, 'x', null]}, when: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)),"
        " big: 2n ** 64n, set: new Set([7]), map: new Map([[1, {b: 2}]])})",
        {"nested": {"a": [1, "x", None]}, "when": WHEN, "big": 2**64, "set": {7},
         "map": {1: {"b": 2}}},
    ),
    ("(() => { const s = {k: 1}; return {a: s, b: s}; })()", "shared"),
    ("(() => { const l = [1]; l.push(l); return l; })()", "cycle"),
]  # fmt: skip

NODE_SCRIPT = r"""
const v8 = require("v8");
const util = require("util");
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = cases.map(([expr, ours]) => {
  const value = eval(expr);
  const back = v8.deserialize(Buffer.from(ours, "hex"));
  const node = v8.serialize(value).toString("hex");
  return {node, readsOurs: util.isDeepStrictEqual(back, value)};
});
process.stdout.write(JSON.stringify(out));
"""


def python_value(value: object) -> object:
    if value == "shared":
        shared = {"k": 1}
        return {"a": shared, "b": shared}
    if value == "cycle":
        loop: list[object] = [1]
        loop.append(loop)
        return loop
    return value


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None:
        reason = "node is not on PATH (apt-get install -y nodejs): no check against workerd's V8"
        if wrangler.required():
            pytest.fail(f"{wrangler.REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return found


def test_bytes_match_node_and_node_reads_ours(node: str) -> None:
    ours = [encode(python_value(value), "v8").hex() for _, value in AGREED]
    cases = [[expr, hex_bytes] for (expr, _), hex_bytes in zip(AGREED, ours, strict=True)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(
        [node, "-e", NODE_SCRIPT], input=json.dumps(cases), capture_output=True, text=True,
        timeout=30, env=env, check=True,
    )  # fmt: skip
    results = json.loads(done.stdout)
    for (expr, value), mine, result in zip(AGREED, ours, results, strict=True):
        assert mine == result["node"], expr
        assert result["readsOurs"], expr
        got = decode(bytes.fromhex(result["node"]), "v8")
        if value == "shared":
            assert got == {"a": {"k": 1}, "b": {"k": 1}} and got["a"] is got["b"]
        elif value == "cycle":
            assert got[0] == 1 and got[1] is got
        else:
            assert got == value, expr
