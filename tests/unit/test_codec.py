from __future__ import annotations

import array
import json
import math
import re
from datetime import date, datetime
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocd.codec import CONTENT_TYPES, decode, encode, normalize_content_type

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
