"""MD5OfMessageBody and MD5OfMessageAttributes exactly as the AWS SDKs check them."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _lv(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big") + b


def md5_of_attributes(attrs: Mapping[str, Mapping[str, Any]]) -> str:
    """Names sorted; each: length-prefixed name and DataType, a transport byte (1 string,
    2 binary), the length-prefixed value (binary values decoded from base64)."""
    buf = bytearray()
    for name in sorted(attrs):
        v = attrs[name]
        buf += _lv(name.encode()) + _lv(str(v["DataType"]).encode())
        if v.get("StringValue") is not None:
            buf += b"\x01" + _lv(str(v["StringValue"]).encode())
        elif v.get("BinaryValue") is not None:
            raw = v["BinaryValue"]
            data = raw if isinstance(raw, bytes) else base64.b64decode(raw)
            buf += b"\x02" + _lv(data)
    return md5_hex(bytes(buf))
