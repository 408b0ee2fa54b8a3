"""ocd's stand-in for Pyodide's ``pyodide`` package (``pyodide.ffi``, ``pyodide.http``)."""

from . import ffi, http

__version__ = "0.0+ocd"
__all__ = ["ffi", "http"]
