"""JSON request bodies holding values nested too deep for ``json.dumps``: a ``Deep`` stands
for one, and ``dumps`` splices its text in. Shared by the REST and SQS fuzzers."""

from __future__ import annotations

import json
from typing import Any


class Deep:
    """A value nested ``depth`` levels deep, written straight into the request's JSON text:
    neither hypothesis nor json.dumps could handle the real thing."""

    def __init__(self, depth: int, kind: str) -> None:
        self.depth = depth
        self.kind = kind

    def text(self) -> str:
        if self.kind == "list":
            return "[" * self.depth + "]" * self.depth
        return '{"a":' * self.depth + "0" + "}" * self.depth

    def __repr__(self) -> str:
        return f"Deep({self.depth}, {self.kind!r})"


def dumps(value: Any) -> bytes:
    """``value`` as JSON bytes, each ``Deep`` in it written out, lone surrogates kept."""
    deep: dict[str, Deep] = {}

    def mark(v: Any) -> Any:
        if isinstance(v, Deep):
            key = f"\x00deep{len(deep)}\x00"
            deep[key] = v
            return key
        if isinstance(v, dict):
            return {k: mark(x) for k, x in v.items()}
        if isinstance(v, list):
            return [mark(x) for x in v]
        return v

    text = json.dumps(mark(value))
    for key, d in deep.items():
        text = text.replace(json.dumps(key), d.text())
    return text.encode("utf-8", "surrogatepass")
