"""Message bodies to bytes and back, one codec per Cloudflare Queues content type.

========  ==========================================  ===========================
type      ``encode`` accepts                          ``decode`` returns
========  ==========================================  ===========================
json      JSON values (dict with str keys, list,      the parsed value (tuples
          tuple, str, int, float, bool, None)         come back as lists)
text      str                                         str
bytes     bytes, bytearray, memoryview, any buffer    bytes
v8        V8's serialization (what workerd writes):   dict, list, set, int, float,
          None, bool, int (Number; BigInt past        str, bool, None, bytes,
          2**53), float, str, dict (str keys: plain   datetime (aware UTC); tuples
          object; other keys: Map), list/tuple        come back as lists (as Map
          (Array), set/frozenset (Set), bytes-like    keys and Set items: tuples);
          (Uint8Array), datetime (Date); shared and   integral numbers as int;
          cyclic references kept. Full table in       old CBOR bodies as they were
          ``ocd.v8``                                  sent
========  ==========================================  ===========================

A body that does not fit its content type raises ``TypeError`` with workerd's wording;
json refuses non-str dict keys rather than silently turning them into strings. Message
sizes are measured on the encoded bytes, so ``len(encode(...))`` is the size.

json goes through orjson (compiled, several times faster) where it gives exactly the standard
``json`` module's bytes, values and errors, and through ``json`` everywhere else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import NoReturn

import orjson

from ocd import v8
from ocd.v8 import V8_MAX_DEPTH as V8_MAX_DEPTH  # re-exported for callers of codec

CONTENT_TYPES: tuple[str, ...] = ("json", "text", "bytes", "v8")

_CANONICAL = {name: name for name in CONTENT_TYPES}


def normalize_content_type(value: object) -> str:
    """Return the canonical content type for a ``contentType`` option.

    ``None`` means the default, ``"json"``; strings are compared case-insensitively.
    """
    if value is None:
        return "json"
    if isinstance(value, str):
        canonical = _CANONICAL.get(value.lower())
        if canonical is not None:
            return canonical
    raise TypeError(f"Unsupported queue message content type: {value}")


def encode(body: object, content_type: str) -> bytes:
    """Serialise ``body`` for a normalised ``content_type``; ``TypeError`` if it does not fit."""
    try:
        encoder = _ENCODERS[content_type]
    except KeyError:
        raise TypeError(f"Unsupported queue message content type: {content_type}") from None
    return encoder(body)


def decode(data: bytes, content_type: str) -> object:
    """Rebuild a body from ``encode``'s output; ``ValueError`` if ``data`` is corrupt."""
    try:
        decoder = _DECODERS[content_type]
    except KeyError:
        raise ValueError(f"Unsupported queue message content type: {content_type}") from None
    return decoder(data)


def _js_typeof(value: object) -> str:
    """JavaScript's ``typeof`` for the nearest JS value, as workerd's messages print it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if callable(value):
        return "function"
    return "object"  # typeof null is "object" too


# json ----------------------------------------------------------------------------------------

_JSON_ERROR = 'Content Type "json" requires a JSON-serializable value, but received: '
_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})


def _json_default(value: object) -> NoReturn:
    raise TypeError(f"{_JSON_ERROR}{type(value).__name__}")


_JSON_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default
)
# Only for strings holding lone surrogates, which UTF-8 cannot carry: escape them as
# \udXXX like JSON.stringify does.
_JSON_ASCII_ENCODER = json.JSONEncoder(
    ensure_ascii=True, allow_nan=False, separators=(",", ":"), default=_json_default
)


def _non_str_key(node: object) -> type | None:
    """Type of the first dict key under ``node`` that is not a str, else None."""
    items: Iterable[object]
    if isinstance(node, dict):
        for key in node:
            if not isinstance(key, str):
                return type(key)
        items = node.values()
    elif isinstance(node, list | tuple):
        items = node
    else:
        return None
    for item in items:
        if type(item) not in _JSON_LEAVES:
            found = _non_str_key(item)
            if found is not None:
                return found
    return None


def _encode_json_std(body: object) -> bytes:
    """``_encode_json`` by the standard ``json`` module alone."""
    try:
        text = _JSON_ENCODER.encode(body)
        # json turns int, float, bool and None keys into strings without asking.
        key_type = _non_str_key(body) if "{" in text else None
    except TypeError:
        try:
            key_type = _non_str_key(body)
        except RecursionError:  # a cycle beyond the value json stopped at
            key_type = None
        if key_type is None:
            raise  # from _json_default, already worded
        raise TypeError(f"{_JSON_ERROR}{key_type.__name__}") from None
    except (ValueError, RecursionError) as exc:
        # NaN or Infinity, a circular reference, or nesting past the recursion limit.
        raise TypeError(f"{_JSON_ERROR}{type(body).__name__} ({exc})") from exc
    if key_type is not None:
        raise TypeError(f"{_JSON_ERROR}{key_type.__name__}")
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _JSON_ASCII_ENCODER.encode(body).encode()


def _decode_json_std(data: bytes) -> object:
    """``_decode_json`` by the standard ``json`` module alone."""
    try:
        return json.loads(data.decode())
    except RecursionError as exc:
        raise ValueError("JSON message body is nested too deeply to decode") from exc


# The same through orjson where it answers as json does. orjson writes a float as repr()
# does (json's way) except from 1e-9 to 1e-4 ("0.00001" and "1e-7" for "1e-05" and
# "1e-07"), and NaN and Infinity as null; it writes enums, UUIDs and subclasses of dict,
# str and int that json refuses or writes its own way; it refuses ints past 64 bits, lone
# surrogates and nesting past 254 levels, which json writes.
_ORJSON_LEAVES = frozenset({str, int, bool, type(None)})
_ORJSON_MAX_DEPTH = 254


def _orjson_writes_as_json(node: object, depth: int = 0) -> bool:
    """Whether orjson writes ``node`` byte for byte as json does, or refuses it: only exact
    dicts with str keys, lists, tuples, str, int, bool, None and floats of 0 or 1e-4 up."""
    if type(node) is float:
        return node == 0.0 or 1e-4 <= abs(node) < math.inf  # false for NaN
    if type(node) in _ORJSON_LEAVES:
        return True
    if depth >= _ORJSON_MAX_DEPTH:  # beyond orjson's reach, and the end of any cycle
        return False
    items: Iterable[object]
    if type(node) is dict:
        for key in node:
            if type(key) is not str:
                return False
        items = node.values()
    elif type(node) is list or type(node) is tuple:
        items = node
    else:
        return False
    for item in items:
        if type(item) not in _ORJSON_LEAVES and not _orjson_writes_as_json(item, depth + 1):
            return False
    return True


def _encode_json(body: object) -> bytes:
    if _orjson_writes_as_json(body):
        try:
            return orjson.dumps(body)
        except orjson.JSONEncodeError:
            pass  # an int past 64 bits or a lone surrogate: json writes them
    return _encode_json_std(body)


# orjson reads an int past 64 bits (19 digits or more) as a float, and nests 1,024 deep
# where json stops at the recursion limit less the stack; it refuses NaN, Infinity, numbers
# past the float range and lone surrogates, which json reads. Any other difference is an
# error in orjson, where json then gives its answer (a value, or today's error).
_DIGITS = b"0123456789"
_DIGITS_TO_0 = bytes.maketrans(_DIGITS, b"0" * 10)
_LONG_NUMBER = b"0" * 19
_ORJSON_MAX_OPENERS = 500  # [ and {: at most that deep, well within json's reach


def _orjson_reads_as_json(data: bytes) -> bool:
    """Whether orjson reads ``data`` as json does, or refuses it."""
    if (
        len(data) - len(data.translate(None, _DIGITS)) >= len(_LONG_NUMBER)  # cheap first
        and _LONG_NUMBER in data.translate(_DIGITS_TO_0)
    ):
        return False
    return (
        len(data) < 2 * _ORJSON_MAX_OPENERS
        or data.count(b"[") + data.count(b"{") < _ORJSON_MAX_OPENERS
    )


def _decode_json(data: bytes) -> object:
    if _orjson_reads_as_json(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return _decode_json_std(data)


# text and bytes ------------------------------------------------------------------------------


def _encode_text(body: object) -> bytes:
    if isinstance(body, str):
        try:
            return body.encode()
        except UnicodeEncodeError as exc:
            raise TypeError(
                'Content Type "text" requires valid Unicode text, but the string has a lone'
                f" surrogate at index {exc.start}"
            ) from None
    raise TypeError(
        f'Content Type "text" requires a value of type string, but received: {_js_typeof(body)}'
    )


def _decode_text(data: bytes) -> str:
    return data.decode()


def _encode_bytes(body: object) -> bytes:
    if type(body) is bytes:
        return body
    if not isinstance(body, str):
        try:
            view = memoryview(body)  # type: ignore[arg-type]  # any buffer will do
        except TypeError:
            pass
        else:
            with view:
                return view.tobytes()  # copies non-contiguous views in logical order
    raise TypeError(
        'Content Type "bytes" requires a value of type ArrayBufferView, but received:'
        f" {_js_typeof(body)}"
    )


def _decode_bytes(data: bytes) -> bytes:
    return data if type(data) is bytes else bytes(data)


_ENCODERS: dict[str, Callable[[object], bytes]] = {
    "json": _encode_json,
    "text": _encode_text,
    "bytes": _encode_bytes,
    "v8": v8.encode,
}
_DECODERS: dict[str, Callable[[bytes], object]] = {
    "json": _decode_json,
    "text": _decode_text,
    "bytes": _decode_bytes,
    "v8": v8.decode,
}
