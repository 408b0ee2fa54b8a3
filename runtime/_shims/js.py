"""``js`` for workers that ocd runs as plain Python: see ``runtime.jsapi``. A name ocd does
not provide imports as a placeholder that ocd's loader refuses (``js.HTMLRewriter``)."""

from typing import Any

from runtime.jsapi import (
    JSON,
    URL,
    Date,
    Headers,
    Object,
    Request,
    Response,
    URLSearchParams,
    console,
    fetch,
    placeholder,
)

__all__ = [
    "JSON",
    "URL",
    "Date",
    "Headers",
    "Object",
    "Request",
    "Response",
    "URLSearchParams",
    "console",
    "fetch",
]


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(name)
    return placeholder(name)
