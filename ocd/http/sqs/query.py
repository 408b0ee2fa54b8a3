"""The Query protocol (form ``Action=...&Version=2012-11-05`` in, XML out), for older SDKs
and curl scripts: requests are decoded into the JSON protocol's member names, so every
action serves both protocols unchanged, and replies are written as the query-era model
(botocore's ``service-2.json`` before 1.31.81) lays them out.

Both naming styles of flattened lists and maps are read: the query names
(``Attribute.1.Name``, ``MessageAttribute.1.Value.StringValue``, ``Tag.1.Key``,
``SendMessageBatchRequestEntry.1.Id``) and the member names the Java SDK v2 sends
(``Attributes.1.Name``, ``Tags.1.Key``, ``Entries.1.Id``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from xml.sax.saxutils import escape

from ocd.http.sqs.errors import SqsError

XMLNS = "http://queue.amazonaws.com/doc/2012-11-05/"
# the deepest key SQS has: SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.
# StringListValue.1 (a deeper one would only nest the decoder's recursion)
MAX_KEY_PARTS = 8
# query list name -> member name (lists of strings)
_LISTS = {
    "AttributeName": "AttributeNames",
    "MessageAttributeName": "MessageAttributeNames",
    "MessageSystemAttributeName": "MessageSystemAttributeNames",
    "TagKey": "TagKeys",
    "AWSAccountId": "AWSAccountIds",
    "ActionName": "Actions",
}
# query map name -> (member name, key field, value field)
_MAPS = {
    "Attribute": ("Attributes", "Name", "Value"),
    "MessageAttribute": ("MessageAttributes", "Name", "Value"),
    "MessageSystemAttribute": ("MessageSystemAttributes", "Name", "Value"),
    "Tag": ("Tags", "Key", "Value"),
}
_ENTRIES = (
    "SendMessageBatchRequestEntry",
    "DeleteMessageBatchRequestEntry",
    "ChangeMessageVisibilityBatchRequestEntry",
    "Entries",
)
# member names the Java SDK v2 sends in place of the query names
_ALIASES = {member: name for name, member in _LISTS.items()} | {
    member: name for name, (member, _, _) in _MAPS.items()
}


def decode(form: Iterable[tuple[str, str]], action: str) -> dict[str, Any]:
    """The members of a query request (without ``Action`` and ``Version``)."""
    tree: dict[str, Any] = {}
    for key, value in form:
        if key in ("Action", "Version"):
            continue
        node = tree
        parts = key.split(".")
        if len(parts) > MAX_KEY_PARTS:
            raise _malformed(key)
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise _malformed(key)
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise _malformed(key)  # both a value and the prefix of deeper keys
        node[parts[-1]] = value
    out = _members(tree)
    if action == "CreateQueue" and "Tags" in out:
        out["tags"] = out.pop("Tags")  # CreateQueue's one lower-case member
    return out


def _indexed(node: Any) -> list[Any]:
    if node == "":
        return []  # an empty list, as botocore sends one: the bare name
    if not isinstance(node, dict):
        raise SqsError("InvalidParameterValueException", "A list parameter has no index.")
    try:
        return [v for _, v in sorted(node.items(), key=lambda kv: int(kv[0]))]
    except ValueError:
        raise SqsError("InvalidParameterValueException", "A list index is not a number.") from None


def _members(tree: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = _ALIASES.get(key, key)
        if name in _LISTS:
            out[_LISTS[name]] = _indexed(value)
        elif name in _MAPS:
            member, k, v = _MAPS[name]
            out[member] = {
                _name(name, k, e.get(k)): _value(e.get(v)) for e in _entries(name, value)
            }
        elif name in _ENTRIES:
            out["Entries"] = [_members(e) if isinstance(e, dict) else e for e in _indexed(value)]
        else:
            out[key] = value
    return out


def _malformed(key: str) -> SqsError:
    return SqsError("MalformedQueryString", f"The query parameter {key[:256]} is malformed.")


def _entries(name: str, node: Any) -> list[dict[str, Any]]:
    found = _indexed(node)
    for i, e in enumerate(found):
        if not isinstance(e, dict):
            raise _malformed(f"{name}.{i + 1}")  # a map entry needs its key and value fields
    return found


def _name(map_name: str, field: str, key: Any) -> Any:
    """A map entry's key: a string, or None when it is missing (the shape check says so);
    deeper keys under it make no name."""
    if isinstance(key, dict):
        raise _malformed(f"{map_name}.N.{field}.{next(iter(key), '')}")
    return key


def _value(v: Any) -> Any:
    """A map value: a string, or a message attribute value's structure."""
    if not isinstance(v, dict):
        return v
    out = {k: x for k, x in v.items() if k in ("DataType", "StringValue", "BinaryValue")}
    if "StringListValue" in v:
        out["StringListValues"] = _indexed(v["StringListValue"])
    if "BinaryListValue" in v:
        out["BinaryListValues"] = _indexed(v["BinaryListValue"])
    return out


# ------------------------------------------------------------------ replies

# list member -> element name of each item (flattened lists)
_ITEMS = {
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Failed": "BatchResultErrorEntry",
    "Results": "ListMessageMoveTasksResultEntry",
}
_MAP_OUT = {
    "Attributes": ("Attribute", "Name", "Value"),
    "MessageAttributes": ("MessageAttribute", "Name", "Value"),
    "Tags": ("Tag", "Key", "Value"),
}
_NO_RESULT = {
    "AddPermission", "ChangeMessageVisibility", "DeleteMessage", "DeleteQueue", "PurgeQueue",
    "RemovePermission", "SetQueueAttributes", "TagQueue", "UntagQueue",
}  # fmt: skip


def text(value: object) -> str:
    """XML text as SQS writes it: ``"`` as ``&quot;`` and CR as ``&#xD;`` too. A character
    XML 1.0 cannot carry at all (a control character, a lone surrogate, echoed from a bad
    request) becomes U+FFFD, so the reply still parses."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    return escape(_NOT_XML.sub("\ufffd", str(value)), {'"': "&quot;", "\r": "&#xD;"})


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _element(name: str, value: Any, op: str, out: list[str]) -> None:
    if isinstance(value, list):
        item = _ITEMS.get(name, f"{op}ResultEntry" if name == "Successful" else name)
        for v in value:
            _element(item, v, op, out)
    elif isinstance(value, dict) and name in _MAP_OUT:
        tag, k, v = _MAP_OUT[name]
        for key, val in value.items():
            out.append(f"<{tag}><{k}>{text(key)}</{k}>")
            _element(v, val, op, out)
            out.append(f"</{tag}>")
    elif isinstance(value, dict):
        out.append(f"<{name}>")
        for k, v in value.items():
            _element(k, v, op, out)
        out.append(f"</{name}>")
    else:
        out.append(f"<{name}>{text(value)}</{name}>")


def reply(op: str, result: Mapping[str, Any], request_id: str) -> str:
    out = [f'<?xml version="1.0" encoding="UTF-8"?>\n<{op}Response xmlns="{XMLNS}">']
    if op not in _NO_RESULT:
        out.append(f"<{op}Result>")
        for k, v in result.items():
            _element(k, v, op, out)
        out.append(f"</{op}Result>")
    out.append(f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>")
    out.append(f"</{op}Response>")
    return "".join(out)


def error(e: SqsError, request_id: str) -> str:
    return fault(e.fault, e.query_code, e.message, request_id)


def fault(whose: str, code: str, message: str, request_id: str) -> str:
    """An error response (``whose``: ``Sender`` or ``Receiver``)."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse xmlns="{XMLNS}"><Error>'
        f"<Type>{whose}</Type><Code>{text(code)}</Code>"
        f"<Message>{text(message)}</Message><Detail/></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    )
