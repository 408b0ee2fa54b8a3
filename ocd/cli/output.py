"""Output of ``ocd queues …``: aligned tables and ``label:  value`` blocks, or JSON."""

from __future__ import annotations

import base64
import datetime as dt
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any


def emit(as_json: bool, result: Any, human: Callable[[], None]) -> None:
    """Print ``result`` as JSON when asked to, else call ``human`` to print it for people."""
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        human()


def notes(envelope: dict[str, Any]) -> None:
    """The envelope's ``messages``, on stderr."""
    for note in envelope.get("messages") or []:
        print(f"note: {note}", file=sys.stderr)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart; cells are kept on one line."""
    cells = [[_one_line(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def pairs(rows: Sequence[tuple[str, str]], indent: str = "") -> str:
    """``label:  value`` lines with the values aligned."""
    width = max(len(label) for label, _ in rows) + 1
    return "\n".join(f"{indent}{label + ':':<{width}}  {_one_line(v)}" for label, v in rows)


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def secs(s: int) -> str:
    """Seconds, with the largest whole unit they make: ``3600s (1h)``."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{s}s ({s // size}{unit})"
    return f"{s}s"


def when(ms: int | None) -> str:
    """Epoch milliseconds as UTC ISO 8601 with milliseconds; ``-`` for none."""
    if not ms:
        return "-"
    t = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def message_body(message: dict[str, Any]) -> str:
    """Pulled bodies arrive as text, or base64 of the JSON text / raw bytes."""
    ctype = (message.get("metadata") or {}).get("CF-Content-Type", "json")
    body = message.get("body")
    if ctype == "text" or not isinstance(body, str):
        return str(body)
    if ctype != "json":
        return f"base64:{body}"
    try:
        return json.dumps(json.loads(base64.b64decode(body, validate=True)), ensure_ascii=False)
    except ValueError:
        return f"base64:{body}"
