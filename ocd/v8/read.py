"""V8 serialization to Python values: what a JS Worker (or ``write``) put in a ``v8`` body."""

from __future__ import annotations

import math
import struct
from datetime import UTC, datetime, timedelta

from ocd.v8 import wire

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A sparse array (new Array(n) with few items set) is written in a few bytes whatever its
# length; past this many slots it is refused rather than allocated.
MAX_SPARSE_LENGTH = 1 << 20
_unpack_double = wire.DOUBLE.unpack_from


class Corrupt(ValueError):
    pass


class Unsupported(ValueError):
    pass


def _number(x: float) -> int | float:
    """A JS number as Pyodide gives it to Python: an int when it is a safe integer."""
    if x.is_integer() and -wire.MAX_SAFE_INTEGER <= x <= wire.MAX_SAFE_INTEGER:
        if x or math.copysign(1.0, x) > 0:  # -0 stays a float
            return int(x)
    return x


def _hashable(value: object, building: set[int]) -> object:
    """``value`` as a Map key or Set item: Arrays as tuples and Sets as frozensets (so a
    Python producer's tuple keys come back as tuples), else wrapped in ``ByIdentity``.
    ``building`` holds the ids of the containers still being read: one of those (a Set
    that holds itself) is not complete enough to copy."""
    try:
        return _frozen(value, building, 0)
    except TypeError:
        return wire.ByIdentity(value)


def _frozen(value: object, building: set[int], depth: int) -> object:
    if isinstance(value, list | set):
        if id(value) in building or depth > wire.V8_MAX_DEPTH:  # cycles through Arrays
            raise TypeError("not a complete value")
        if isinstance(value, set):
            return frozenset(value)  # its items are hashable already
        return tuple([_frozen(item, building, depth + 1) for item in value])
    hash(value)  # TypeError for dict
    return value


class _Reader:
    __slots__ = ("building", "data", "end", "objects", "pos", "version")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.end = len(data)
        self.pos = 0
        self.objects: list[object] = []  # by JS object id
        self.version = 0
        self.building: set[int] = set()  # ids of the Arrays, Maps and Sets being read

    def varint(self) -> int:
        data = self.data
        result = shift = 0
        while True:
            byte = data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 63:
                raise Corrupt("a varint longer than 64 bits")

    def double(self) -> float:
        (x,) = _unpack_double(self.data, self.pos)
        self.pos += 8
        return float(x)

    def raw(self, length: int) -> bytes:
        start = self.pos
        if length > self.end - start:
            raise Corrupt(f"{length} bytes announced, {self.end - start} left")
        self.pos = start + length
        return self.data[start : self.pos]

    def tag(self) -> int:
        data = self.data
        tag = data[self.pos]
        while tag == wire.PADDING:
            self.pos += 1
            tag = data[self.pos]
        self.pos += 1
        return tag

    def peek(self) -> int:
        pos = self.pos
        data = self.data
        while data[pos] == wire.PADDING:
            pos += 1
        return data[pos]

    def header(self) -> None:
        if self.tag() != wire.VERSION_TAG:
            raise Corrupt("no version header")
        self.version = self.varint()
        if not wire.OLDEST_VERSION <= self.version <= wire.VERSION:
            raise Unsupported(
                f"serialization format version {self.version}; ocd reads"
                f" {wire.OLDEST_VERSION} to {wire.VERSION}"
            )

    def value(self, depth: int) -> object:
        tag = self.tag()
        if tag == wire.ONE_BYTE_STRING:
            return self.raw(self.varint()).decode("latin-1")
        if tag == wire.INT32:
            n = self.varint()
            return (n >> 1) ^ -(n & 1)
        if tag == wire.BEGIN_JS_OBJECT:
            return self.js_object(depth + 1)
        if tag == wire.BEGIN_DENSE_ARRAY:
            return self.dense_array(depth + 1)
        if tag == wire.DOUBLE_TAG:
            return _number(self.double())
        if tag == wire.NULL or tag == wire.UNDEFINED or tag == wire.THE_HOLE:
            return None
        if tag == wire.TRUE:
            return True
        if tag == wire.FALSE:
            return False
        if tag == wire.TWO_BYTE_STRING:
            return self.two_byte_string()
        if tag == wire.OBJECT_REFERENCE:
            ref = self.varint()
            if ref >= len(self.objects):
                raise Corrupt(f"a reference to object {ref}, of {len(self.objects)} read")
            found = self.objects[ref]
            if isinstance(found, _Buffer):
                return self.after_buffer(found)
            return found
        return self.rare(tag, depth)

    def rare(self, tag: int, depth: int) -> object:
        if tag == wire.UINT32:
            return self.varint()
        if tag == wire.UTF8_STRING:
            return self.raw(self.varint()).decode("utf-8")
        if tag == wire.BIGINT:
            return self.bigint()
        if tag == wire.BEGIN_MAP:
            return self.js_map(depth + 1)
        if tag == wire.BEGIN_SET:
            return self.js_set(depth + 1)
        if tag == wire.BEGIN_SPARSE_ARRAY:
            return self.sparse_array(depth + 1)
        if tag == wire.DATE:
            return self.register(self.date())
        if tag == wire.ARRAY_BUFFER or tag == wire.RESIZABLE_ARRAY_BUFFER:
            length = self.varint()
            if tag == wire.RESIZABLE_ARRAY_BUFFER:
                self.varint()  # maxByteLength
            buffer = _Buffer(self.raw(length))
            self.objects.append(buffer)
            return self.after_buffer(buffer)
        if tag == wire.TRUE_OBJECT:
            return self.register(True)
        if tag == wire.FALSE_OBJECT:
            return self.register(False)
        if tag == wire.NUMBER_OBJECT:
            return self.register(_number(self.double()))
        if tag == wire.BIGINT_OBJECT:
            return self.register(self.bigint())
        if tag == wire.STRING_OBJECT:
            id_ = len(self.objects)
            self.objects.append(None)
            string = self.value(depth)
            if not isinstance(string, str):
                raise Corrupt("a String object around a non-string")
            self.objects[id_] = string
            return string
        if tag == wire.VERIFY_OBJECT_COUNT:
            self.varint()
            return self.value(depth)
        if tag in wire.UNSUPPORTED:
            raise Unsupported(f"{wire.UNSUPPORTED[tag]} has no Python equivalent")
        if tag == wire.ARRAY_BUFFER_VIEW:
            raise Corrupt("a typed array without its ArrayBuffer")
        raise Corrupt(f"unknown tag 0x{tag:02x} at offset {self.pos - 1}")

    def register(self, value: object) -> object:
        self.objects.append(value)
        return value

    def two_byte_string(self) -> str:
        length = self.varint()
        if length & 1:
            raise Corrupt("a two-byte string of an odd byte length")
        return self.raw(length).decode("utf-16-le", "surrogatepass")

    def bigint(self) -> int:
        bitfield = self.varint()
        magnitude = int.from_bytes(self.raw(bitfield >> 1), "little")
        return -magnitude if bitfield & 1 else magnitude

    def date(self) -> datetime:
        ms = self.double()
        if math.isnan(ms):
            raise Unsupported("an invalid Date (NaN) has no Python equivalent")
        try:
            return _EPOCH + timedelta(microseconds=round(ms * 1000))
        except OverflowError:
            raise Unsupported(f"a Date outside Python's years 1 to 9999 ({ms} ms)") from None

    def after_buffer(self, buffer: _Buffer) -> object:
        """An ArrayBuffer is bytes, unless a view on it follows: then that view's bytes."""
        if self.pos >= self.end or self.peek() != wire.ARRAY_BUFFER_VIEW:
            return buffer.data
        self.tag()
        subtag = self.data[self.pos]
        self.pos += 1
        offset = self.varint()
        length = self.varint()
        if self.version >= 14:
            self.varint()  # flags: length-tracking, backed by a resizable buffer
        size = wire.VIEW_ELEMENT_SIZE.get(subtag)
        if size is None:
            raise Corrupt(f"unknown typed array subtag 0x{subtag:02x}")
        data = buffer.data
        if offset + length > len(data) or offset % size or length % size:
            raise Corrupt(f"a typed array out of its ArrayBuffer's {len(data)} bytes")
        view = data if offset == 0 and length == len(data) else data[offset : offset + length]
        return self.register(view)

    def deeper(self, depth: int) -> None:
        if depth > wire.V8_MAX_DEPTH:
            raise Unsupported(f"values nested more than {wire.V8_MAX_DEPTH} levels deep")

    def key(self) -> str:
        tag = self.tag()
        if tag == wire.ONE_BYTE_STRING:
            return self.raw(self.varint()).decode("latin-1")
        if tag == wire.TWO_BYTE_STRING:
            return self.two_byte_string()
        if tag == wire.UTF8_STRING:
            return self.raw(self.varint()).decode("utf-8")
        if tag == wire.INT32:
            n = self.varint()
            return str((n >> 1) ^ -(n & 1))
        if tag == wire.UINT32:
            return str(self.varint())
        if tag == wire.DOUBLE_TAG:
            x = _number(self.double())
            return str(x) if isinstance(x, int) else repr(x)
        raise Corrupt(f"a property key with tag 0x{tag:02x}")

    def properties(self, end_tag: int, into: dict[str, object], depth: int) -> int:
        count = 0
        while self.peek() != end_tag:
            key = self.key()
            into[key] = self.value(depth)
            count += 1
        self.tag()
        if self.varint() != count:
            raise Corrupt("a property count that does not match")
        return count

    def js_object(self, depth: int) -> dict[str, object]:
        self.deeper(depth)
        result: dict[str, object] = {}
        self.objects.append(result)
        self.properties(wire.END_JS_OBJECT, result, depth)
        return result

    def dense_array(self, depth: int) -> list[object]:
        self.deeper(depth)
        length = self.varint()
        if length > self.end - self.pos:
            raise Corrupt(f"an array of {length} items in {self.end - self.pos} bytes")
        result: list[object] = []
        self.objects.append(result)
        self.building.add(id(result))
        for _ in range(length):
            result.append(self.value(depth))
        self.building.discard(id(result))
        self.properties(wire.END_DENSE_ARRAY, {}, depth)  # an Array's other properties
        if self.varint() != length:
            raise Corrupt("an array length that does not match")
        return result

    def sparse_array(self, depth: int) -> list[object]:
        self.deeper(depth)
        length = self.varint()
        if length > MAX_SPARSE_LENGTH:
            raise Unsupported(f"a sparse array of length {length} (ocd reads up to 2**20)")
        result: list[object] = [None] * length
        self.objects.append(result)
        props: dict[str, object] = {}
        self.properties(wire.END_SPARSE_ARRAY, props, depth)
        if self.varint() != length:
            raise Corrupt("an array length that does not match")
        for key, item in props.items():
            if key.isascii() and key.isdigit() and int(key) < length:
                result[int(key)] = item
        return result

    def js_map(self, depth: int) -> dict[object, object]:
        self.deeper(depth)
        result: dict[object, object] = {}
        self.objects.append(result)
        count = 0
        self.building.add(id(result))
        while self.peek() != wire.END_MAP:
            key = _hashable(self.value(depth), self.building)
            result[key] = self.value(depth)
            count += 2
        self.building.discard(id(result))
        self.tag()
        if self.varint() != count:
            raise Corrupt("a Map length that does not match")
        if len(result) * 2 != count:
            raise Unsupported("a Map with keys that are equal in Python (1 and true, 1 and 1n)")
        return result

    def js_set(self, depth: int) -> set[object]:
        self.deeper(depth)
        result: set[object] = set()
        self.objects.append(result)
        count = 0
        self.building.add(id(result))
        while self.peek() != wire.END_SET:
            result.add(_hashable(self.value(depth), self.building))
            count += 1
        self.building.discard(id(result))
        self.tag()
        if self.varint() != count:
            raise Corrupt("a Set size that does not match")
        if len(result) != count:
            raise Unsupported("a Set with items that are equal in Python (1 and true, 1 and 1n)")
        return result


class _Buffer:
    """An ArrayBuffer while reading: a view may follow it, or refer back to it."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def decode(data: bytes) -> object:
    """The value V8 serialized into ``data``; ``ValueError`` if it is corrupt or holds what
    Python cannot stand for."""
    reader = _Reader(data)
    try:
        reader.header()
        result = reader.value(0)
        while reader.pos < reader.end:
            if data[reader.pos] != wire.PADDING:
                raise Corrupt(f"{reader.end - reader.pos} bytes after the value")
            reader.pos += 1
    except Unsupported as exc:
        raise ValueError(f"v8 message body not readable in Python: {exc}") from None
    except (Corrupt, IndexError, struct.error, UnicodeDecodeError, OverflowError) as exc:
        reason = str(exc) if isinstance(exc, Corrupt) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, IndexError | struct.error):
            reason = "it ends early"
        raise ValueError(f"corrupt v8 message body: {reason}") from None
    return result
