"""The SQS listener's JSON replies: a ReceiveMessage's template gives json.dumps's bytes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from ocd.http.sqs.app import encode, request_id


def _plain(body: str, i: int = 0) -> dict[str, Any]:
    return {
        "MessageId": f"0000000{i}-89ab-cdef-0123-456789abcdef",
        "ReceiptHandle": "bGVhc2V8bG9jYWx8cTE.hreqYV42__SYJbzgY9Mr0hnkXwqCmCx47whjdFluOJE",
        "MD5OfBody": "9e107d9d372bb6826bd81d3542a419d6",
        "Body": body,
    }


BODIES = ["x" * 100, 'quote " backslash \\ slash /', "tab\tnl\ncr\r\x01", "é ü 日本 😀", ""]


@pytest.mark.parametrize(
    "out",
    [
        {},
        {"Messages": [_plain(b, i) for i, b in enumerate(BODIES)]},
        {"Messages": [_plain("a")]},
        {
            "Messages": [
                _plain("a"),
                {**_plain("b"), "Attributes": {"SentTimestamp": "1"}},
                {
                    **_plain("c"),
                    "MessageAttributes": {"k": {"DataType": "String", "StringValue": "é"}},
                    "MD5OfMessageAttributes": "x",
                },
                {"ReceiptHandle": "r", "MessageId": "m", "MD5OfBody": "d", "Body": "other order"},
            ]
        },
    ],
)
def test_receive_reply_is_json_dumps(out: dict[str, Any]) -> None:
    assert encode("ReceiveMessage", out) == json.dumps(out).encode()
    assert json.loads(encode("ReceiveMessage", out)) == out


def test_other_actions() -> None:
    out = {"Successful": [{"Id": "1"}], "Failed": []}
    assert encode("DeleteMessageBatch", out) == json.dumps(out).encode()


def test_request_ids_are_version_4_uuids() -> None:
    ids = {request_id() for _ in range(2000)}
    assert len(ids) == 2000
    for i in ids:
        u = uuid.UUID(i)
        assert (str(u), u.version, u.variant) == (i, 4, uuid.RFC_4122)
