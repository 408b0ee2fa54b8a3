"""Reads ``v8`` bodies stored before ocd wrote real V8 serialization: CBOR (cbor2) with
value sharing and a few tags of ocd's own.

Nothing writes this format any more; messages already in a queue stay readable. A CBOR
item never starts with 0xFF (the "break" code) and real V8 always does, so the first
byte tells them apart. These bodies come back as they were sent: tuples, frozensets,
bytearrays, naive datetimes, Decimals and non-string dict keys included.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import cbor2

from ocd.v8.wire import V8_MAX_DEPTH

# Tags for what plain CBOR cannot tell apart, in the first-come-first-served range:
# 0x6F6364 is "ocd".
_TAG_TUPLE = 0x6F636401
_TAG_FROZENSET = 0x6F636402
_TAG_BYTEARRAY = 0x6F636403
_TAG_DATETIME = 0x6F636404
_TAG_DECIMAL = 0x6F636405
_MICROSECOND = timedelta(microseconds=1)

# Each container costs the decoder up to three levels: shared-value tag, type tag, array.
_DECODE_MAX_DEPTH = 4 * V8_MAX_DEPTH


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


def decode(data: bytes) -> object:
    """The value a CBOR-era ``encode`` wrote; ``ValueError`` if ``data`` is corrupt."""
    try:
        return cbor2.loads(data, semantic_decoders=_DECODERS, max_depth=_DECODE_MAX_DEPTH)
    except cbor2.CBORError as exc:
        raise ValueError(f"corrupt v8 message body: {exc}") from exc
