from __future__ import annotations

import array
import enum
import json
import math
import re
import uuid
from collections import OrderedDict, namedtuple
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ocd.codec import (
    CONTENT_TYPES,
    _decode_json,
    _decode_json_std,
    _encode_json,
    _encode_json_std,
    _orjson_reads_as_json,
    _orjson_writes_as_json,
    decode,
    encode,
    normalize_content_type,
)

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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


class Colour(enum.Enum):
    RED = 1


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
        (uuid.UUID(int=1), "UUID"),  # orjson would write these two
        ([Colour.RED], "Colour"),
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


def test_json_decode_of_absurd_nesting_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        decode(b"[" * 100_000 + b"]" * 100_000, "json")


# The orjson path gives exactly the json module's answers: the same bytes, values and errors.


def outcome(codec: Callable[[object], object], value: object) -> object:
    try:
        return codec(value)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


def assert_same_outcome(got: object, expected: object) -> None:
    if type(expected) is tuple and expected and isinstance(expected[0], type):
        assert got == expected  # the same error, word for word
    else:
        assert_same(got, expected)


class Level(enum.IntEnum):
    HIGH = 3


class Items(dict[str, int]):
    def items(self):  # type: ignore[override]  # json lists a dict subclass's items()
        return [("z", 9)]


Point = namedtuple("Point", "x y")
reordered = OrderedDict(a=1, b=2)
reordered.move_to_end("a")


@pytest.mark.parametrize(
    "body",
    [1e-05, -2.5e-07, 9.999999999999999e-05, 1e-04, 1e-10, 5e-324, 1e16, 1.5e300, -0.0,
     math.nan, [math.inf], {"x": -math.inf}, 2**63, 2**64, -(2**63) - 1, 2**200, "a\ud800",
     {"\udc00": 1}, Level.HIGH, {"l": [Level.HIGH]}, Colour.RED, uuid.UUID(int=1),
     reordered, Items(a=1), Point(1, 2), type("S", (str,), {})("s"), {True: 1},
     type("F", (float,), {})(1.5), orjson.Fragment(b"[1]"), datetime(2024, 1, 1), (1, (2.5,))],
)  # fmt: skip
def test_json_values_orjson_would_write_otherwise_are_written_as_json_does(body: object) -> None:
    assert_same_outcome(outcome(_encode_json, body), outcome(_encode_json_std, body))


def test_json_nesting_past_orjson_is_written_as_json_does() -> None:
    deep: list[object] = []
    for _ in range(400):
        deep = [deep]
    assert encode(deep, "json") == _encode_json_std(deep) == b"[" * 401 + b"]" * 401


@pytest.mark.parametrize(
    "data",
    [b"18446744073709551615", b"18446744073709551616", b"-9223372036854775809",
     b"[1234567890123456789012345678901234567890]", b"1e400", b"[-1e400]", b"NaN",
     b"[Infinity]", b'"\\ud800"', b'{"\\udc00": 1}', b"1e-05", b"0.1e1", b"-0", b"-0.0",
     b'{"a":1,"a":2}', b"\xef\xbb\xbf{}", b"\xff", b"", b"[1,]",
     b"[" * 600 + b"]" * 600, b"[" * 1020 + b"]" * 1020],  # json's reach, orjson's
)  # fmt: skip
def test_json_bodies_orjson_would_read_otherwise_are_read_as_json_does(data: bytes) -> None:
    assert_same_outcome(outcome(_decode_json, data), outcome(_decode_json_std, data))


edge_floats = (
    st.floats()
    | st.floats(min_value=-1e-3, max_value=1e-3)
    | st.sampled_from([1e-9, 1e-5, 1e-4, 1e15, 1e16, 1e21, -0.0, 5e-324, 1.7976931348623157e308])
)
edge_ints = (
    st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1])
)
any_text = st.text() | st.text(st.characters(exclude_categories=()))  # lone surrogates too
wide_json_values = st.recursive(
    st.none() | st.booleans() | edge_ints | edge_floats | any_text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=5).map(tuple)
        | st.dictionaries(any_text, children, max_size=5)
    ),
    max_leaves=25,
)


@settings(PROPERTY, max_examples=1000)
@given(wide_json_values)
def test_json_orjson_writes_what_json_writes(body: object) -> None:
    expected = outcome(_encode_json_std, body)
    assert_same_outcome(outcome(_encode_json, body), expected)
    if _orjson_writes_as_json(body):  # and orjson itself, where the codec takes it
        try:
            assert orjson.dumps(body) == expected
        except orjson.JSONEncodeError:
            pass


@settings(PROPERTY, max_examples=1000)
@given(wide_json_values)
def test_json_orjson_reads_what_json_reads(body: object) -> None:
    try:
        data = _encode_json_std(body)
    except TypeError:
        assume(False)
        raise
    expected = _decode_json_std(data)
    assert_same(_decode_json(data), expected)
    if _orjson_reads_as_json(data):
        try:
            assert_same(orjson.loads(data), expected)
        except orjson.JSONDecodeError:
            pass


json_numbers = st.from_regex(rb"\A-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?\Z")
JSON_PIECES = [
    b"[", b"]", b"{", b"}", b",", b":", b" ", b'"a"', b'"\\ud800"', b'"\\u00e9"', b"1", b"-", b".",
    b"e", b"0", b"null", b"true", b"NaN", b"Infinity", b"1e400", b"\xff", b"18446744073709551616",
    b"\xef\xbb\xbf", b"\x00", b"\t",
]  # fmt: skip
json_fragments = st.lists(st.sampled_from(JSON_PIECES), max_size=12).map(b"".join)


@settings(PROPERTY, max_examples=1000)
@given(json_numbers | json_fragments)
def test_json_orjson_reads_or_refuses_what_json_does(data: bytes) -> None:
    assert_same_outcome(outcome(_decode_json, data), outcome(_decode_json_std, data))


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
