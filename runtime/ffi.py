"""What ``pyodide.ffi`` offers worker code, for values that are Python values already.

Under Pyodide these convert between Python and JavaScript; ocd runs workers as ordinary
Python, so they hand values through: ``to_js(x)`` sent to a queue arrives as ``x``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from runtime.values import JsBytes


class JsProxy:
    """The type of JavaScript objects under Pyodide; no value here is one."""


class JsException(Exception):
    """An error thrown by JavaScript code."""


def to_js(
    obj: Any,
    *,
    depth: int = -1,
    pyproxies: Any = None,
    create_pyproxies: bool = True,
    dict_converter: Callable[[Iterable[Any]], Any] | None = None,
    default_converter: Callable[..., Any] | None = None,
) -> Any:
    """``obj`` as it would arrive after a round trip through JavaScript: dicts go through
    ``dict_converter`` (``js.Object.fromEntries`` gives a dict back), bytes gain ``buffer``."""
    if isinstance(obj, Mapping):
        items = [(k, to_js(v, dict_converter=dict_converter)) for k, v in obj.items()]
        return dict(items) if dict_converter is None else dict_converter(items)
    if isinstance(obj, list | tuple):
        return [to_js(v, dict_converter=dict_converter) for v in obj]
    if isinstance(obj, bytes | bytearray | memoryview):
        return JsBytes(obj)
    return obj


def to_py(obj: Any, *args: Any, **kwargs: Any) -> Any:
    """``obj.to_py()`` where the value has one, else ``obj``."""
    method = getattr(obj, "to_py", None)
    return method() if callable(method) else obj


class _Proxy:
    """What ``create_proxy`` returns: calls and attributes go to the wrapped object."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._obj(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._obj, name)

    def destroy(self) -> None:
        """Nothing to free: there is no JavaScript side."""


def create_proxy(obj: Any, *, capture_this: bool = False, roundtrip: bool = True) -> Any:
    return _Proxy(obj)


def create_once_callable(obj: Callable[..., Any]) -> Callable[..., Any]:
    return obj


def destroy_proxies(proxies: Iterable[Any]) -> None:
    """Nothing to free."""
