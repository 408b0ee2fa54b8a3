"""The ``v8`` content type: a stand-in for V8's structured clone, as CBOR (cbor2).

Bodies are CBOR with value sharing, so shared and cyclic references survive:
``d[0] is d[1]`` after a round trip when it held before. Round-tripped with their types:
None, bool, int of any size, float (nan, inf), complex, str, bytes, bytearray, list, tuple,
dict with any hashable keys, set, frozenset, date, datetime (naive stays naive, aware keeps
its UTC offset), Decimal (exactly, incl. -0 and NaN), Fraction, UUID, and cbor2's other
stdlib types (ipaddress, re.Pattern). Not supported, because cbor2 cannot express it or
would write a payload it cannot read back:

* objects of other classes, functions, files, generators: ``TypeError``, the analogue of
  structured clone's DataCloneError;
* a cycle through a tuple (``t = ([],); t[0].append(t)``): a tuple is built after its
  items, so they cannot refer back to it. Cycles through lists and dicts work (a set's
  items are hashable, so no cycle can pass through one);
* nesting deeper than ``V8_MAX_DEPTH`` containers: cbor2's encoder recurses natively and
  segfaults the process a few thousand levels down;
* str with lone surrogates (CBOR text is UTF-8).

Lossy but accepted: only exact types can be hooked, so subclasses come back as their
base: namedtuple and other hashable sequences (range) as tuple, other sequences (deque,
UserList) as list, OrderedDict and other mappings as dict, set and frozenset subclasses as
set and frozenset, IntEnum as int; hashable mappings other than dict are refused.
memoryview comes back as bytes; a datetime's tzinfo becomes a fixed-offset ``timezone``
and ``fold`` is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from itertools import chain
from typing import NoReturn

import cbor2

V8_MAX_DEPTH = 256

# Tags for what plain CBOR cannot tell apart, in the first-come-first-served range:
# 0x6F6364 is "ocd".
_TAG_TUPLE = 0x6F636401
_TAG_FROZENSET = 0x6F636402
_TAG_BYTEARRAY = 0x6F636403
_TAG_DATETIME = 0x6F636404
_TAG_DECIMAL = 0x6F636405
_TAG_SET = 258  # the registered tag; cbor2 decodes it natively
_MAJOR_ARRAY = 4
_MAJOR_TAG = 6
_MICROSECOND = timedelta(microseconds=1)

# Each container costs the decoder up to three levels: shared-value tag, type tag, array.
_DECODE_MAX_DEPTH = 4 * V8_MAX_DEPTH
_ERROR = 'Content Type "v8" cannot serialize '
_LEAVES = (str, bytes, bytearray, memoryview, int, float, complex, type(None))
_SCALARS = frozenset({str, int, float, bool, type(None), bytes})  # the common leaves


def _write_tagged_array(encoder: cbor2.CBOREncoder, tag: int, items: Collection[object]) -> None:
    encoder.encode_length(_MAJOR_TAG, tag)
    encoder.encode_length(_MAJOR_ARRAY, len(items))
    for item in items:
        encoder.encode(item)


@cbor2.shareable_encoder
def _encode_tuple(encoder: cbor2.CBOREncoder, value: tuple[object, ...]) -> None:
    _write_tagged_array(encoder, _TAG_TUPLE, value)


@cbor2.shareable_encoder
def _encode_set(encoder: cbor2.CBOREncoder, value: set[object]) -> None:
    _write_tagged_array(encoder, _TAG_SET, value)


@cbor2.shareable_encoder
def _encode_frozenset(encoder: cbor2.CBOREncoder, value: frozenset[object]) -> None:
    _write_tagged_array(encoder, _TAG_FROZENSET, value)


@cbor2.shareable_encoder
def _encode_bytearray(encoder: cbor2.CBOREncoder, value: bytearray) -> None:
    encoder.encode_length(_MAJOR_TAG, _TAG_BYTEARRAY)
    encoder.encode_bytes(bytes(value))


def _encode_memoryview(encoder: cbor2.CBOREncoder, value: memoryview) -> None:
    encoder.encode_bytes(value.tobytes())


def _encode_datetime(encoder: cbor2.CBOREncoder, value: datetime) -> None:
    # cbor2's tag 0 refuses naive datetimes and garbles offsets with seconds, and
    # fromisoformat drops sub-second offsets: send the offset apart, in microseconds.
    encoder.encode_length(_MAJOR_TAG, _TAG_DATETIME)
    offset = value.utcoffset()
    if offset is None:
        encoder.encode_string(value.isoformat())
        return
    encoder.encode_length(_MAJOR_ARRAY, 2)
    encoder.encode_string(value.replace(tzinfo=None).isoformat())
    encoder.encode_int(offset // _MICROSECOND)


def _encode_decimal(encoder: cbor2.CBOREncoder, value: Decimal) -> None:
    # cbor2's tag 4 loses -0 and turns NaN and Infinity into floats.
    encoder.encode_length(_MAJOR_TAG, _TAG_DECIMAL)
    encoder.encode_string(str(value))


def _default(encoder: cbor2.CBOREncoder, value: object) -> NoReturn:
    raise TypeError(f"{_ERROR}a value of type {type(value).__name__}")


_ENCODERS: dict[type, cbor2.EncoderHook] = {
    tuple: _encode_tuple,
    set: _encode_set,
    frozenset: _encode_frozenset,
    bytearray: _encode_bytearray,
    memoryview: _encode_memoryview,
    datetime: _encode_datetime,
    Decimal: _encode_decimal,
}


def _items(value: object) -> list[object] | tuple[object, ...]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected an array, got {type(value).__name__}")
    return value


def _decode_tuple(value: object, immutable: bool) -> tuple[object, ...]:
    return tuple(_items(value))


def _frozenset_from(value: object) -> frozenset[object]:
    return frozenset(_items(value))


@cbor2.shareable_decoder(immutable=True)  # items must come back hashable
def _decode_frozenset(immutable: bool) -> tuple[None, Callable[[object], frozenset[object]]]:
    return None, _frozenset_from


@cbor2.shareable_decoder
def _decode_bytearray(immutable: bool) -> tuple[bytearray, Callable[[object], bytearray]]:
    result = bytearray()  # registered before its payload, so references resolve to it

    def fill(value: object) -> bytearray:
        if not isinstance(value, bytes):
            raise ValueError(f"expected a byte string, got {type(value).__name__}")
        result[:] = value
        return result

    return result, fill


def _decode_datetime(value: object, immutable: bool) -> datetime:
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    match value:
        case [str(wall_time), int(offset)]:
            tzinfo = timezone(offset * _MICROSECOND)
            return datetime.fromisoformat(wall_time).replace(tzinfo=tzinfo)
    raise ValueError(f"expected a string or [string, int], got {value!r}")


def _decode_decimal(value: object, immutable: bool) -> Decimal:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return Decimal(value)


_DECODERS: dict[int, cbor2.SemanticDecoderCallback | cbor2.ShareableDecoderInitializer] = {
    _TAG_TUPLE: _decode_tuple,
    _TAG_FROZENSET: _decode_frozenset,
    _TAG_BYTEARRAY: _decode_bytearray,
    _TAG_DATETIME: _decode_datetime,
    _TAG_DECIMAL: _decode_decimal,
}


def _children(value: object) -> Iterator[object] | None:
    """What cbor2 will encode inside ``value``, in its order; None for a leaf."""
    if isinstance(value, list | tuple | set | frozenset):
        return iter(value)
    if isinstance(value, dict):
        return chain.from_iterable(value.items())
    if isinstance(value, _LEAVES):
        return None
    # cbor2 encodes any Mapping as a map and any Sequence as an array.
    if isinstance(value, Mapping):
        return chain.from_iterable(value.items())
    if isinstance(value, Sequence):
        return iter(value)
    if isinstance(value, cbor2.CBORTag):  # cbor2 internals; can nest without limit
        raise TypeError(f"{_ERROR}a value of type CBORTag")
    return None


def _hook_hashable(value: object, hooks: dict[type, cbor2.EncoderHook]) -> bool:
    """Route a hashable container subclass to the tuple or frozenset encoder.

    cbor2 decodes a plain array or 258-set as a list or set, or as a tuple or frozenset
    when it sits in a set or dict key, and a shared one keeps the type of its first
    appearance: a namedtuple sent as a plain array would make ``[p, {p}]`` unreadable.
    Returns whether ``value`` is rebuilt only after its items (so cannot be in a cycle).
    """
    kind = type(value)
    if kind is tuple or kind is frozenset:
        return True
    if kind in _ENCODERS or kind.__hash__ is None:  # list, dict, set and subclasses
        return False
    if isinstance(value, frozenset):
        hooks[kind] = _encode_frozenset
    elif isinstance(value, Mapping):  # no immutable mapping to decode into
        raise TypeError(f"{_ERROR}a value of type {kind.__name__}")
    else:  # namedtuple, range, other hashable sequences
        hooks[kind] = _encode_tuple
    return True


def _check_shape(root: object) -> dict[type, cbor2.EncoderHook]:
    """Reject what cbor2 would crash on or could not decode: deep nesting, tuple cycles.

    Walks depth-first in cbor2's order, entering each container once as value sharing
    does, so the depth here is the depth cbor2 will reach. Returns encoders for the
    hashable container subclasses met on the way.
    """
    hooks: dict[type, cbor2.EncoderHook] = {}
    children = _children(root)
    if children is None:
        return hooks
    seen: dict[int, object] = {id(root): root}  # holds them, so no id is reused mid-walk
    open_immutables = {id(root)} if _hook_hashable(root, hooks) else set()
    path: list[tuple[Iterator[object], int]] = [(children, id(root))]
    while path:
        children, owner = path[-1]
        for child in children:
            if type(child) in _SCALARS:
                continue
            key = id(child)
            if key in seen:
                if key in open_immutables:
                    raise TypeError(
                        f"{_ERROR}a cycle through a tuple; make the cycle go through a list"
                    )
                continue
            grandchildren = _children(child)
            if grandchildren is None:
                continue
            if len(path) >= V8_MAX_DEPTH:
                raise TypeError(f"{_ERROR}values nested more than {V8_MAX_DEPTH} levels deep")
            seen[key] = child
            if _hook_hashable(child, hooks):
                open_immutables.add(key)
            path.append((grandchildren, key))
            break
        else:
            path.pop()
            open_immutables.discard(owner)
    return hooks


def encode(body: object) -> bytes:
    """CBOR for ``body``; ``TypeError`` for what structured clone or cbor2 cannot carry."""
    encoders = _ENCODERS
    hooks = _check_shape(body)
    if hooks:
        encoders = {**encoders, **hooks}
    try:
        return cbor2.dumps(body, value_sharing=True, encoders=encoders, default=_default)
    except (cbor2.CBORError, ValueError) as exc:  # ValueError: str with lone surrogates
        raise TypeError(f"{_ERROR}this value: {exc}") from exc


def decode(data: bytes) -> object:
    """The value ``encode`` wrote; ``ValueError`` if ``data`` is corrupt."""
    try:
        return cbor2.loads(data, semantic_decoders=_DECODERS, max_depth=_DECODE_MAX_DEPTH)
    except cbor2.CBORError as exc:
        raise ValueError(f"corrupt v8 message body: {exc}") from exc
