"""Message bodies as Python Workers code sees them after conversion from JavaScript.

On Cloudflare a body arrives as a JS value; code written before the SDK converted bodies
itself calls ``message.body.to_py()``, newer code uses the body directly. Both work here:
bodies are the plain Python values they were sent as, in subclasses that add ``to_py()``
(returning the value itself) and, for dicts, attribute access. ``isinstance`` checks and
equality are those of the base type: ``JsList([1]) == [1]`` and
``isinstance(JsStr("a"), str)``.
"""

from __future__ import annotations

from typing import Any

from runtime._jsdict import JsDict


class JsList(list[Any]):
    """A list with ``to_py()``, as a JS array converted to Python."""

    __slots__ = ()

    def to_py(self, *args: Any, **kwargs: Any) -> JsList:
        return self


class JsStr(str):
    """A str with ``to_py()``."""

    __slots__ = ()

    def to_py(self, *args: Any, **kwargs: Any) -> JsStr:
        return self


class JsBytes(bytes):
    """Bytes with ``to_py()``, ``to_bytes()`` and ``buffer`` (the ArrayBuffer of a Uint8Array)."""

    __slots__ = ()

    def to_py(self, *args: Any, **kwargs: Any) -> JsBytes:
        return self

    def to_bytes(self) -> bytes:
        return bytes(self)

    @property
    def buffer(self) -> JsBytes:
        return self


_AS_IS = frozenset((int, float, bool, type(None)))


def as_js_value(value: Any, _memo: dict[int, Any] | None = None) -> Any:
    """``value`` with ``to_py()`` on it and on every dict and list inside it. A dict or list
    met twice (a v8 body's shared references and cycles) becomes one converted object."""
    cls = type(value)
    if cls is dict or cls is JsDict or cls is list or cls is JsList:
        memo: dict[int, Any] = {} if _memo is None else _memo
        done = memo.get(id(value))
        if done is not None:
            return done
        if cls is dict or cls is JsDict:
            # copied whole, then what needs converting replaced: numbers, booleans and None
            # (most of a JSON body's leaves) stay as they are, without a call each
            d = memo[id(value)] = JsDict(value)
            for k, v in value.items():
                if type(v) not in _AS_IS:
                    d[k] = as_js_value(v, memo)
            return d
        items = memo[id(value)] = JsList(value)
        for i, v in enumerate(value):
            if type(v) not in _AS_IS:
                items[i] = as_js_value(v, memo)
        return items
    if cls is str:
        return JsStr(value)
    if cls is bytes or cls is bytearray or cls is memoryview:
        return JsBytes(value)
    return value
