"""SQS message attributes: the MD5s the Java, JS and Ruby SDKs check (the reference's
vectors, cross-checked there against moto), and SQS's rules on names, types and values."""

from __future__ import annotations

import base64

import pytest

from ocd.http.sqs import message_attributes as ma
from ocd.http.sqs.errors import SqsError
from ocd.http.sqs.md5 import md5_hex, md5_of_attributes

MIXED = {
    "n": {"DataType": "Number", "StringValue": "42.5"},
    "c": {"DataType": "String.custom", "StringValue": "héllo wörld"},
    "b": {"DataType": "Binary", "BinaryValue": base64.b64encode(b"\x00\x01\xff").decode()},
}


def test_md5s_match_the_reference_vectors() -> None:
    assert md5_hex(b"hello") == "5d41402abc4b2a76b9719d911017c592"
    one = {"a": {"DataType": "String", "StringValue": "x"}}
    assert md5_of_attributes(one) == "a512aac9938034acb0b3c3d965944bf1"


def test_md5_is_the_sdks_algorithm_over_sorted_names_custom_types_and_decoded_binary() -> None:
    # the Java SDK v2's calculateMessageAttributesMd5, written out independently
    import hashlib

    def lv(b: bytes) -> bytes:
        return len(b).to_bytes(4, "big") + b

    buf = b""
    for name in sorted(MIXED):
        v = MIXED[name]
        buf += lv(name.encode()) + lv(v["DataType"].encode())
        if "StringValue" in v:
            buf += b"\x01" + lv(v["StringValue"].encode())
        else:
            buf += b"\x02" + lv(base64.b64decode(v["BinaryValue"]))
    assert md5_of_attributes(MIXED) == hashlib.md5(buf).hexdigest()


def test_a_send_with_attributes_stores_them_and_answers_both_md5s() -> None:
    trace = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc"}}
    p = ma.parse({"MessageAttributes": MIXED, "MessageSystemAttributes": trace})
    assert p.md5s() == {
        "MD5OfMessageAttributes": md5_of_attributes(MIXED),
        "MD5OfMessageSystemAttributes": md5_of_attributes(trace),
    }
    user, system = ma.load(p.blob)
    assert user == MIXED and system == trace
    # names, types and values (binary decoded) count toward the message size
    assert (
        p.size
        == sum(
            len(k) + len(v["DataType"].encode()) + len(v.get("StringValue", "").encode())
            for k, v in {**MIXED, **trace}.items()
        )
        + 3
    )


def test_no_attributes_store_nothing_and_answer_no_md5() -> None:
    p = ma.parse({"MessageAttributes": {}})
    assert p.blob is None and p.md5s() == {}


@pytest.mark.parametrize(
    ("attrs", "says"),
    [
        ({f"a{i}": {"DataType": "String", "StringValue": "x"} for i in range(11)}, "[11]"),
        ({"AWS.x": {"DataType": "String", "StringValue": "x"}}, "reserved"),
        ({"amazon.x": {"DataType": "String", "StringValue": "x"}}, "reserved"),
        ({".x": {"DataType": "String", "StringValue": "x"}}, "start or end with '.'"),
        ({"a..b": {"DataType": "String", "StringValue": "x"}}, "successive '.'"),
        ({"a b": {"DataType": "String", "StringValue": "x"}}, "can only contain"),
        ({"": {"DataType": "String", "StringValue": "x"}}, "non-empty message (user) attribute"),
        ({"n" * 257: {"DataType": "String", "StringValue": "x"}}, "shorter than 256 Bytes"),
        ({"a": {"DataType": "Strung", "StringValue": "x"}}, "type prefixes"),
        ({"a": {"DataType": "String", "StringValue": ""}}, "non-empty"),
        ({"a": {"DataType": "Number", "StringValue": "12abc"}}, "number"),
        ({"a": {"DataType": "Number", "StringValue": "1" * 39}}, "number"),
        ({"a": {"DataType": "Binary", "BinaryValue": "!!"}}, "base64"),
        ({"a": {"DataType": "Binary", "StringValue": "x"}}, "Binary"),
    ],
)
def test_attributes_sqs_refuses_are_invalid_parameter_values(attrs, says) -> None:
    with pytest.raises(SqsError) as e:
        ma.parse({"MessageAttributes": attrs})
    assert e.value.query_code == "InvalidParameterValue"
    assert says in e.value.message


def test_only_awstraceheader_is_a_system_attribute() -> None:
    with pytest.raises(SqsError, match="system attribute name 'Other'"):
        ma.parse({"MessageSystemAttributes": {"Other": {"DataType": "String", "StringValue": "x"}}})


def test_receive_filters_by_name_all_and_prefix() -> None:
    assert ma.wanted(["All"], "x") and ma.wanted([".*"], "x")
    assert ma.wanted(["foo.*"], "foo.bar") and not ma.wanted(["foo.*"], "food")
    assert ma.wanted(["x"], "x") and not ma.wanted(["y"], "x") and not ma.wanted([], "x")
