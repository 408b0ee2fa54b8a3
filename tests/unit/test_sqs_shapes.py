"""The request shapes the SQS endpoint checks before an action runs."""

from __future__ import annotations

from typing import Any

import pytest

from ocd.http.sqs import shapes
from ocd.http.sqs.actions import ACTIONS
from ocd.http.sqs.errors import SqsError


def test_every_action_has_a_request_shape() -> None:
    # an action without one would fail every request with a KeyError
    assert set(shapes.REQUESTS) == set(ACTIONS)


@pytest.mark.parametrize(
    "op, params, where",
    [
        ("ListQueues", {"MaxResults": "5"}, "MaxResults"),
        ("ListQueues", {"MaxResults": True}, "MaxResults"),
        ("ReceiveMessage", {"AttributeNames": [["All"]]}, "AttributeNames.1"),
        ("ReceiveMessage", {"MessageSystemAttributeNames": "All"}, "MessageSystemAttributeNames"),
        ("TagQueue", {"Tags": {"k": 1}}, "Tags.k"),
        ("SendMessageBatch", {"Entries": [{"DelaySeconds": 1.5}]}, "Entries.1.DelaySeconds"),
        (
            "SendMessage",
            {"MessageAttributes": {"a": {"StringListValues": [1]}}},
            "MessageAttributes.a.StringListValues.1",
        ),
    ],
)
def test_a_wrong_type_over_json_names_the_member(
    op: str, params: dict[str, Any], where: str
) -> None:
    with pytest.raises(SqsError) as e:
        shapes.check(op, params, json=True)
    assert e.value.query_code == "InvalidParameterValue"
    assert f"parameter {where} is invalid" in e.value.message


def test_query_integers_are_strings_the_action_parses_and_nulls_are_absent() -> None:
    shapes.check("ReceiveMessage", {"MaxNumberOfMessages": "5", "QueueUrl": None}, json=False)
    with pytest.raises(SqsError):
        shapes.check("ReceiveMessage", {"MaxNumberOfMessages": {"x": "5"}}, json=False)
