"""V8's serialization format as workerd writes it: the tags, and what both directions share.

The format is V8's ``ValueSerializer`` (src/objects/value-serializer.cc) at version 15,
with its header: a body starts ``FF 0F``. Every JS object (plain object, Array, Map, Set,
Date, ArrayBuffer, typed array, primitive wrapper) gets the next id when it is first
written or read, in that order, and a later ``^ id`` refers back to it; strings, numbers
and BigInts are values, never referred to.
"""

from __future__ import annotations

import struct
from typing import Final

V8_MAX_DEPTH = 256
VERSION: Final = 15
HEADER: Final = b"\xff\x0f"
# Oldest format read: 13 is the first without the legacy host-object framing; views carry
# a flags varint from 14 on.
OLDEST_VERSION: Final = 13
MAX_SAFE_INTEGER: Final = 2**53 - 1

DOUBLE = struct.Struct("<d")

# Tags, as value-serializer.cc names them.
VERSION_TAG: Final = 0xFF
PADDING: Final = 0x00
VERIFY_OBJECT_COUNT: Final = ord("?")
THE_HOLE: Final = ord("-")
UNDEFINED: Final = ord("_")
NULL: Final = ord("0")
TRUE: Final = ord("T")
FALSE: Final = ord("F")
INT32: Final = ord("I")
UINT32: Final = ord("U")
DOUBLE_TAG: Final = ord("N")
BIGINT: Final = ord("Z")
UTF8_STRING: Final = ord("S")
ONE_BYTE_STRING: Final = ord('"')
TWO_BYTE_STRING: Final = ord("c")
OBJECT_REFERENCE: Final = ord("^")
BEGIN_JS_OBJECT: Final = ord("o")
END_JS_OBJECT: Final = ord("{")
BEGIN_SPARSE_ARRAY: Final = ord("a")
END_SPARSE_ARRAY: Final = ord("@")
BEGIN_DENSE_ARRAY: Final = ord("A")
END_DENSE_ARRAY: Final = ord("$")
DATE: Final = ord("D")
TRUE_OBJECT: Final = ord("y")
FALSE_OBJECT: Final = ord("x")
NUMBER_OBJECT: Final = ord("n")
BIGINT_OBJECT: Final = ord("z")
STRING_OBJECT: Final = ord("s")
BEGIN_MAP: Final = ord(";")
END_MAP: Final = ord(":")
BEGIN_SET: Final = ord("'")
END_SET: Final = ord(",")
ARRAY_BUFFER: Final = ord("B")
RESIZABLE_ARRAY_BUFFER: Final = ord("~")
ARRAY_BUFFER_VIEW: Final = ord("V")
UINT8_ARRAY: Final = ord("B")  # the view subtag

# What a Python value cannot stand for, by tag: refused on reading with this name.
UNSUPPORTED: Final = {
    ord("R"): "a RegExp",
    ord("r"): "an Error",
    ord("\\"): "a host object (node writes typed arrays so; workerd does not)",
    ord("t"): "a transferred ArrayBuffer",
    ord("u"): "a SharedArrayBuffer",
    ord("m"): "a WebAssembly.Memory",
    ord("w"): "a WebAssembly.Module",
    ord("p"): "a shared object",
}

# Element sizes of the ArrayBufferView subtags ("?" is a DataView).
VIEW_ELEMENT_SIZE: Final = {
    ord("b"): 1,
    ord("B"): 1,
    ord("C"): 1,
    ord("w"): 2,
    ord("W"): 2,
    ord("d"): 4,
    ord("D"): 4,
    ord("h"): 2,
    ord("f"): 4,
    ord("F"): 8,
    ord("q"): 8,
    ord("Q"): 8,
    ord("?"): 1,
}


class ByIdentity:
    """A Map key or Set item that Python cannot hash (a JS object or Map, or anything that
    holds one), compared and hashed by identity as JavaScript compares it.

    ``value`` is the decoded object. Encoding a ``ByIdentity`` writes its ``value``.
    """

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByIdentity) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)

    def __repr__(self) -> str:
        return f"ByIdentity({self.value!r})"
