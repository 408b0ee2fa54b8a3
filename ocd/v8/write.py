"""Python values to V8 serialization, the bytes a Worker's ``v8`` body holds in workerd."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from datetime import UTC, datetime, timedelta

from ocd.v8 import wire

_ERROR = 'Content Type "v8" cannot serialize '
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_pack_double = wire.DOUBLE.pack


def _varint(buf: bytearray, n: int) -> None:
    while n >= 0x80:
        buf.append((n & 0x7F) | 0x80)
        n >>= 7
    buf.append(n)


class _Writer:
    __slots__ = ("buf", "ids", "keep", "next_id")

    def __init__(self) -> None:
        self.buf = bytearray(wire.HEADER)
        self.ids: dict[int, int] = {}  # id() of a Python object -> its JS object id
        self.next_id = 0
        self.keep: list[object] = []  # holds what ids refers to, so no id() is reused

    def value(self, value: object, depth: int) -> None:
        kind = type(value)
        if kind is str:
            self.string(value)  # type: ignore[arg-type]
        elif kind is int:
            self.number(value)  # type: ignore[arg-type]
        elif kind is dict or kind is list:
            self.container(value, depth)
        elif value is None:
            self.buf.append(wire.NULL)
        elif kind is bool:
            self.buf.append(wire.TRUE if value else wire.FALSE)
        elif kind is float:
            self.buf.append(wire.DOUBLE_TAG)
            self.buf += _pack_double(value)
        else:
            self.other(value, depth)

    def other(self, value: object, depth: int) -> None:
        if isinstance(value, bool):
            self.buf.append(wire.TRUE if value else wire.FALSE)
        elif isinstance(value, int):
            self.number(int(value))
        elif isinstance(value, float):
            self.buf.append(wire.DOUBLE_TAG)
            self.buf += _pack_double(float(value))
        elif isinstance(value, str):
            self.string(str(value))
        elif isinstance(value, wire.ByIdentity):
            self.value(value.value, depth)
        elif isinstance(value, bytes | bytearray | memoryview):
            self.uint8_array(value)
        elif isinstance(value, datetime):
            self.date(value)
        elif isinstance(value, Mapping | Sequence | Set):
            self.container(value, depth)
        else:
            raise TypeError(f"{_ERROR}a value of type {type(value).__name__}")

    def number(self, n: int) -> None:
        buf = self.buf
        if _INT32_MIN <= n <= _INT32_MAX:
            buf.append(wire.INT32)
            _varint(buf, n << 1 if n >= 0 else ((-n) << 1) - 1)  # zigzag
        elif -wire.MAX_SAFE_INTEGER <= n <= wire.MAX_SAFE_INTEGER:
            buf.append(wire.DOUBLE_TAG)
            buf += _pack_double(n)
        else:  # a BigInt: sign bit and byte length, then 64-bit digits, least first
            magnitude = -n if n < 0 else n
            length = (magnitude.bit_length() + 63) // 64 * 8
            buf.append(wire.BIGINT)
            _varint(buf, length << 1 | (n < 0))
            buf += magnitude.to_bytes(length, "little")

    def string(self, s: str) -> None:
        buf = self.buf
        if s.isascii():
            data = s.encode("ascii")
        else:
            try:
                data = s.encode("latin-1")
            except UnicodeEncodeError:
                data = s.encode("utf-16-le", "surrogatepass")  # lone surrogates too, as JS
                # V8's reader expects two-byte characters at an even offset.
                if (len(buf) + 1 + _varint_size(len(data))) & 1:
                    buf.append(wire.PADDING)
                buf.append(wire.TWO_BYTE_STRING)
                _varint(buf, len(data))
                buf += data
                return
        buf.append(wire.ONE_BYTE_STRING)
        _varint(buf, len(data))
        buf += data

    def seen(self, value: object) -> bool:
        """Write a reference and say so if ``value`` was written before; else give it the
        next id."""
        ids = self.ids
        ref = ids.get(id(value))
        if ref is not None:
            self.buf.append(wire.OBJECT_REFERENCE)
            _varint(self.buf, ref)
            return True
        ids[id(value)] = self.next_id
        self.next_id += 1
        self.keep.append(value)
        return False

    def uint8_array(self, value: bytes | bytearray | memoryview) -> None:
        # A Uint8Array, as workerd writes one: its ArrayBuffer (an object, with an id of its
        # own) and then the view over all of it.
        if self.seen(value):  # gave the buffer an id; the view is the one referred to
            return
        self.ids[id(value)] = self.next_id
        self.next_id += 1
        data = value.tobytes() if isinstance(value, memoryview) else value
        buf = self.buf
        buf.append(wire.ARRAY_BUFFER)
        _varint(buf, len(data))
        buf += data
        buf.append(wire.ARRAY_BUFFER_VIEW)
        buf.append(wire.UINT8_ARRAY)
        buf.append(0)  # byteOffset
        _varint(buf, len(data))
        buf.append(0)  # flags

    def date(self, value: datetime) -> None:
        if self.seen(value):
            return
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        self.buf.append(wire.DATE)
        self.buf += _pack_double((value - _EPOCH) // _MICROSECOND / 1000)

    def container(self, value: object, depth: int) -> None:
        if self.seen(value):
            return
        depth += 1
        if depth > wire.V8_MAX_DEPTH:
            raise TypeError(f"{_ERROR}values nested more than {wire.V8_MAX_DEPTH} levels deep")
        buf = self.buf
        item = self.value
        if isinstance(value, Mapping):
            if all(isinstance(key, str) for key in value):
                buf.append(wire.BEGIN_JS_OBJECT)
                for key, child in value.items():
                    self.string(key)
                    item(child, depth)
                buf.append(wire.END_JS_OBJECT)
                _varint(buf, len(value))
            else:
                buf.append(wire.BEGIN_MAP)
                for key, child in value.items():
                    item(key, depth)
                    item(child, depth)
                buf.append(wire.END_MAP)
                _varint(buf, 2 * len(value))
        elif isinstance(value, Set):
            buf.append(wire.BEGIN_SET)
            for child in value:
                item(child, depth)
            buf.append(wire.END_SET)
            _varint(buf, len(value))
        else:
            items = value if isinstance(value, list | tuple) else list(value)  # type: ignore[call-overload]
            buf.append(wire.BEGIN_DENSE_ARRAY)
            _varint(buf, len(items))
            for child in items:
                item(child, depth)
            buf.append(wire.END_DENSE_ARRAY)
            buf.append(0)  # no other properties
            _varint(buf, len(items))


def _varint_size(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)


def encode(body: object) -> bytes:
    """V8 serialization (version 15, with header) of ``body``; ``TypeError`` for what
    structured clone cannot carry or Python cannot say in JavaScript."""
    writer = _Writer()
    writer.value(body, 0)
    return bytes(writer.buf)
