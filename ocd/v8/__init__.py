"""The ``v8`` content type: V8's own serialization, the bytes workerd writes for a Worker's
``v8`` body (version 15, with header: every body starts ``FF 0F``). A JS Worker and a
Python worker read each other's ``v8`` messages.

=================================  =============================  ============================
Python sends                       JavaScript sees                Python receives
=================================  =============================  ============================
None                               null                           None
bool                               true / false                   bool
int, ``|n| <= 2**53 - 1``          Number                         int
int beyond that                    BigInt                         int
float (nan, inf, -0.0 too)         Number                         float; int if integral
str (lone surrogates too)          string                         str
dict whose keys are all str        plain object (``body.k``)      dict
any other dict, Mapping            Map                            dict (keys: see below)
list, tuple, other Sequence        Array                          list
set, frozenset                     Set                            set
bytes, bytearray, memoryview       Uint8Array (own ArrayBuffer)   bytes
datetime (naive taken as UTC)      Date                           datetime, aware UTC
=================================  =============================  ============================

From JavaScript also: ``undefined`` and array holes → None; a sparse array → list with
None in the gaps (up to 2**20 long); an ArrayBuffer, DataView or any typed array →
bytes, the view's own bytes in memory order (``memoryview(b).cast("d")`` for a
Float64Array); Boolean, Number, String and BigInt objects → their primitive; a
non-index property of an Array is dropped; number keys of objects become str as in JS.

Shared and cyclic references survive both ways: ``d["a"] is d["b"]`` after a round trip
when it held before, and a list can hold itself.

Map keys and Set items must be hashable in Python: an Array comes back as a tuple and a
Set as a frozenset (so a Python producer's tuple keys return as tuples); a key Python
still cannot hash (an object or Map, or an Array holding one or itself) comes back as
``ByIdentity(value)``, hashed and compared by identity as JS compares it. A Map whose keys
Python takes as equal (``1`` and ``true``, ``1`` and ``1n``) is refused.

Numbers follow Pyodide (Cloudflare's Python Workers): an integral Number within ±(2**53-1)
is an int, so a float ``2.0`` comes back as ``2``. A Date is a double of milliseconds:
between Python workers microseconds survive for years ~1830 to ~2100 (the double's
precision); a JS Date holds whole milliseconds.

Encoding refuses with ``TypeError`` (structured clone's DataCloneError): other classes
(Decimal, UUID, date, complex, functions, files) and nesting deeper than ``V8_MAX_DEPTH``
containers. Decoding raises ``ValueError`` for corrupt bytes and for what Python has no
value for (RegExp, Error, SharedArrayBuffer, WebAssembly, node's host-object typed arrays,
an invalid Date or one outside years 1..9999, nesting deeper than ``V8_MAX_DEPTH``).

Bodies stored before ocd wrote V8 are CBOR and stay readable (``ocd.v8.cbor``): V8 always
starts with 0xFF and a CBOR item never does.
"""

from __future__ import annotations

from ocd.v8 import cbor, read
from ocd.v8.wire import V8_MAX_DEPTH as V8_MAX_DEPTH
from ocd.v8.wire import ByIdentity as ByIdentity
from ocd.v8.write import encode as encode

__all__ = ["V8_MAX_DEPTH", "ByIdentity", "decode", "encode"]


def decode(data: bytes) -> object:
    """The value in a ``v8`` body, V8 or (older) CBOR; ``ValueError`` if ``data`` is corrupt
    or holds what Python has no value for."""
    if data[:1] == b"\xff":
        return read.decode(data)
    return cbor.decode(data)
