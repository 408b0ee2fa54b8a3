"""SQS message attributes (``MessageAttributes``) and system attributes
(``MessageSystemAttributes``: ``AWSTraceHeader``): checked as SQS checks them, stored with
the message as one opaque JSON blob (``NewMessage.attrs``), filtered on receive.

The blob is ``{"m": {name: value}, "s": {name: value}}`` with each value in SQS's own
member names (``DataType``, ``StringValue`` or ``BinaryValue`` in base64), so it reads back
as the JSON protocol writes it. Workers and the pull API never see it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from ocd.http.sqs.errors import SqsError, invalid
from ocd.http.sqs.md5 import md5_of_attributes

MAX_ATTRIBUTES = 10
MAX_NAME = 256
SYSTEM_NAMES = ("AWSTraceHeader",)
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_TYPE = re.compile(r"(String|Number|Binary)(\.[^\s]+)?")
_RESERVED = ("aws.", "amazon.")
# SQS's allowed characters, for string values as for bodies
BAD_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

Attributes = dict[str, dict[str, str]]


class Parsed(NamedTuple):
    """A send's attributes, checked: user and system ones (None when absent), the bytes
    they count toward the message size, and the blob to store."""

    user: Attributes | None
    system: Attributes | None
    size: int
    blob: bytes | None

    def md5s(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.user:
            out["MD5OfMessageAttributes"] = md5_of_attributes(self.user)
        if self.system:
            out["MD5OfMessageSystemAttributes"] = md5_of_attributes(self.system)
        return out


NONE = Parsed(None, None, 0, None)


def parse(entry: Mapping[str, Any]) -> Parsed:
    """The attributes of one SendMessage (or batch entry); InvalidParameterValue for any
    SQS refuses."""
    raw_user = entry.get("MessageAttributes")
    raw_system = entry.get("MessageSystemAttributes")
    if not raw_user and not raw_system:
        return NONE
    user, size = _values(raw_user, system=False) if raw_user else (None, 0)
    system, ssize = _values(raw_system, system=True) if raw_system else (None, 0)
    doc: dict[str, Attributes] = {}
    if user:
        doc["m"] = user
    if system:
        doc["s"] = system
    blob = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return Parsed(user, system, size + ssize, blob)


def _values(raw: Any, system: bool) -> tuple[Attributes, int]:
    what = "system attribute" if system else "attribute"
    if not isinstance(raw, dict):
        raise invalid(f"Message {what}s must be a map of names to values.")
    if len(raw) > MAX_ATTRIBUTES:
        raise invalid(
            f"Number of message {what}s [{len(raw)}] exceeds the allowed maximum "
            f"[{MAX_ATTRIBUTES}]."
        )
    out: Attributes = {}
    size = 0
    for name, value in raw.items():
        if system:
            if name not in SYSTEM_NAMES:
                raise invalid(f"Message system attribute name '{name}' is invalid.")
        else:
            _check_name(name)
        checked, n = _value(name, value, system)
        out[name] = checked
        size += len(name.encode()) + n
    return out, size


def _check_name(name: object) -> None:
    """SQS's rules for a message attribute name, each refused in SQS's words."""
    if not isinstance(name, str) or not name:
        raise invalid("The request must contain non-empty message (user) attribute names.")
    if len(name) > MAX_NAME:
        raise invalid("Message (user) attribute names must be shorter than 256 Bytes")
    if not _NAME.fullmatch(name):
        raise invalid(  # SQS's text, its trailing space included
            "Message (user) attributes name can only contain upper and lower score "
            "characters, digits, periods, hyphens and underscores. "
        )
    if name.lower().startswith(_RESERVED) or name.startswith(".") or name.endswith("."):
        raise invalid(
            "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These "
            "strings are reserved for internal use. Additionally, they cannot start or end "
            "with '.'."
        )
    if ".." in name:
        raise invalid("Message (user) attribute name must not have successive '.' characters.")


def _value(name: str, value: Any, system: bool) -> tuple[dict[str, str], int]:
    if not isinstance(value, dict):
        raise invalid(f"The message attribute '{name}' must be a map.")
    dtype = value.get("DataType")
    if not isinstance(dtype, str) or not dtype:
        raise invalid(f"The message attribute '{name}' must contain a DataType.")
    m = _TYPE.fullmatch(dtype)
    if m is None or len(dtype) > MAX_NAME:
        raise invalid(
            f"The type of message (user) attribute '{name}' is invalid. You must use only "
            "the following supported type prefixes: Binary, Number, String."
        )
    if system and dtype != "String":
        raise invalid(f"The message system attribute '{name}' must be of type String.")
    if value.get("StringListValues") or value.get("BinaryListValues"):
        raise invalid(f"The message attribute '{name}': list values are not supported.")
    kind = m.group(1)
    size = len(dtype.encode())
    if kind == "Binary":
        data = value.get("BinaryValue")
        if value.get("StringValue") is not None:
            raise invalid(
                f"The message attribute '{name}' with type 'Binary' must use field 'Binary'."
            )
        raw = _binary(name, data)
        return {"DataType": dtype, "BinaryValue": base64.b64encode(raw).decode()}, size + len(raw)
    text = value.get("StringValue")
    if value.get("BinaryValue") is not None:
        raise invalid(f"The message attribute '{name}' with type '{kind}' must use field 'String'.")
    if not isinstance(text, str) or not text:
        raise _empty(name, kind)
    if BAD_CHARS.search(text):
        raise SqsError(
            "InvalidMessageContents",
            f"Invalid characters found in the value of message attribute '{name}'.",
        )
    if kind == "Number":
        _check_number(name, text)
    return {"DataType": dtype, "StringValue": text}, size + len(text.encode())


def _empty(name: str, kind: str) -> SqsError:
    return invalid(
        f"Message (user) attribute '{name}' must contain a non-empty value of type '{kind}'."
    )


def _binary(name: str, data: Any) -> bytes:
    if isinstance(data, bytes | bytearray):
        raw = bytes(data)
    elif isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise invalid(f"The message attribute '{name}' has an invalid base64 value.") from None
    else:
        raw = b""
    if not raw:
        raise _empty(name, "Binary")
    return raw


def _check_number(name: str, text: str) -> None:
    try:
        n = Decimal(text.strip())
    except InvalidOperation:
        n = Decimal("NaN")
    digits = len(n.as_tuple().digits) if n.is_finite() else 0
    exponent = n.adjusted() if n.is_finite() and n != 0 else 0
    if not n.is_finite() or digits > 38 or not -128 <= exponent <= 126:
        raise invalid(f"Can't cast the value of message (user) attribute '{name}' to a number.")


def load(blob: bytes | None) -> tuple[Attributes, Attributes]:
    """(user, system) attributes of a stored blob; empty maps for none (or an unreadable
    blob, which only another writer of the column could leave)."""
    if not blob:
        return {}, {}
    try:
        doc = json.loads(blob)
        return dict(doc.get("m") or {}), dict(doc.get("s") or {})
    except (ValueError, AttributeError):
        return {}, {}


def wanted(names: list[str], name: str) -> bool:
    """Whether a ReceiveMessage's MessageAttributeNames asks for ``name``: ``All``, ``.*``,
    the name itself, or a prefix ``foo.*``."""
    for n in names:
        if n in ("All", ".*", name) or (n.endswith(".*") and name.startswith(n[:-1])):
            return True
    return False
