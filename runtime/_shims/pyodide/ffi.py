"""``pyodide.ffi`` for workers that ocd runs as plain Python: see ``runtime.ffi``."""

from runtime.ffi import (
    JsException,
    JsProxy,
    create_once_callable,
    create_proxy,
    destroy_proxies,
    to_js,
    to_py,
)
from runtime.values import JsBytes as JsBuffer
from runtime.values import JsList as JsArray

__all__ = [
    "JsArray",
    "JsBuffer",
    "JsException",
    "JsProxy",
    "create_once_callable",
    "create_proxy",
    "destroy_proxies",
    "to_js",
    "to_py",
]
