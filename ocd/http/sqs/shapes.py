"""The request shapes of every SQS action (botocore's ``service-2.json``, input members
only), and the check that a request has them before its action runs: a member of the
wrong type is InvalidParameterValue naming it, so the actions read strings, integers,
lists and maps without guarding each one. Members the table does not name are ignored,
as AWS ignores them; a member set to ``null`` counts as absent.

Query requests arrive with every value a string, so an integer there is a string the
action parses (``context.integer``); over AWS JSON it must be a JSON integer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ocd.http.sqs.errors import invalid

STRING = "string"
INTEGER = "integer"


@dataclass(frozen=True, slots=True)
class Map:
    """A JSON object of string keys to ``value``s."""

    value: Shape


@dataclass(frozen=True, slots=True)
class List:
    item: Shape


Struct = dict[str, "Shape"]
Shape = str | Map | List | Struct

NAMES = List(STRING)
STRINGS = Map(STRING)
_VALUE: Struct = {
    "DataType": STRING,
    "StringValue": STRING,
    "BinaryValue": STRING,  # base64 over JSON
    "StringListValues": NAMES,
    "BinaryListValues": NAMES,
}
_MESSAGE: Struct = {
    "MessageBody": STRING,
    "DelaySeconds": INTEGER,
    "MessageAttributes": Map(_VALUE),
    "MessageSystemAttributes": Map(_VALUE),
    "MessageDeduplicationId": STRING,
    "MessageGroupId": STRING,
}
_URL: Struct = {"QueueUrl": STRING}
_PAGE: Struct = {"NextToken": STRING, "MaxResults": INTEGER}

REQUESTS: dict[str, Struct] = {
    "AddPermission": {**_URL, "Label": STRING, "AWSAccountIds": NAMES, "Actions": NAMES},
    "CancelMessageMoveTask": {"TaskHandle": STRING},
    "ChangeMessageVisibility": {**_URL, "ReceiptHandle": STRING, "VisibilityTimeout": INTEGER},
    "ChangeMessageVisibilityBatch": {
        **_URL,
        "Entries": List({"Id": STRING, "ReceiptHandle": STRING, "VisibilityTimeout": INTEGER}),
    },
    "CreateQueue": {"QueueName": STRING, "Attributes": STRINGS, "tags": STRINGS},
    "DeleteMessage": {**_URL, "ReceiptHandle": STRING},
    "DeleteMessageBatch": {**_URL, "Entries": List({"Id": STRING, "ReceiptHandle": STRING})},
    "DeleteQueue": _URL,
    "GetQueueAttributes": {**_URL, "AttributeNames": NAMES},
    "GetQueueUrl": {"QueueName": STRING, "QueueOwnerAWSAccountId": STRING},
    "ListDeadLetterSourceQueues": {**_URL, **_PAGE},
    "ListMessageMoveTasks": {"SourceArn": STRING, "MaxResults": INTEGER},
    "ListQueueTags": _URL,
    "ListQueues": {"QueueNamePrefix": STRING, **_PAGE},
    "PurgeQueue": _URL,
    "ReceiveMessage": {
        **_URL,
        "AttributeNames": NAMES,
        "MessageSystemAttributeNames": NAMES,
        "MessageAttributeNames": NAMES,
        "MaxNumberOfMessages": INTEGER,
        "VisibilityTimeout": INTEGER,
        "WaitTimeSeconds": INTEGER,
        "ReceiveRequestAttemptId": STRING,
    },
    "RemovePermission": {**_URL, "Label": STRING},
    "SendMessage": {**_URL, **_MESSAGE},
    "SendMessageBatch": {**_URL, "Entries": List({"Id": STRING, **_MESSAGE})},
    "SetQueueAttributes": {**_URL, "Attributes": STRINGS},
    "StartMessageMoveTask": {
        "SourceArn": STRING,
        "DestinationArn": STRING,
        "MaxNumberOfMessagesPerSecond": INTEGER,
    },
    "TagQueue": {**_URL, "Tags": STRINGS},
    "UntagQueue": {**_URL, "TagKeys": NAMES},
}


def check(op: str, params: dict[str, Any], json: bool) -> None:
    """InvalidParameterValue for the first member of ``params`` that is not of ``op``'s
    shape (``json``: the request came over AWS JSON, where integers are JSON numbers)."""
    _struct(REQUESTS[op], params, "", json)


def _struct(shape: Struct, value: dict[str, Any], where: str, json: bool) -> None:
    for name, member in shape.items():
        v = value.get(name)
        if v is not None:
            _check(member, v, f"{where}{name}", json)


def _check(shape: Shape, value: Any, where: str, json: bool) -> None:
    if shape == STRING:
        if not isinstance(value, str):
            raise _wrong(where, "must be a string")
    elif shape == INTEGER:
        ok = isinstance(value, str) if not json else type(value) is int
        if not ok:
            raise _wrong(where, "must be an integer")
    elif isinstance(shape, List):
        if not isinstance(value, list):
            raise _wrong(where, "must be a list")
        for i, item in enumerate(value):
            if item is None:
                raise _wrong(f"{where}.{i + 1}", "must not be null")
            _check(shape.item, item, f"{where}.{i + 1}", json)
    elif isinstance(shape, Map):
        if not isinstance(value, dict):
            raise _wrong(where, "must be a map")
        for key, item in value.items():
            if not isinstance(key, str) or item is None:
                raise _wrong(where, "must map names to values")
            _check(shape.value, item, f"{where}.{key}", json)
    elif isinstance(shape, dict):
        if not isinstance(value, dict):
            raise _wrong(where, "must be a structure")
        _struct(shape, value, f"{where}.", json)


def _wrong(where: str, reason: str) -> Exception:
    return invalid(f"Value for parameter {where[:256]} is invalid. Reason: {reason}.")
