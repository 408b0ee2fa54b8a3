"""Stack traces of a bundled worker, told in the user's own files: esbuild writes a source
map beside each bundle (``index.js.map``), and a V8 stack frame ``at f (index.js:97:11)`` is
rewritten to ``at f (src/index.ts:40:11)``. workerd does not apply source maps itself, so ocd
does, here, with the map's ``mappings`` decoded once per bundle."""

from __future__ import annotations

import bisect
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

_B64 = {
    c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
}
# "(index.js:97:11)" or "at index.js:97:11": a module name, a 1-based line and column
_FRAME = re.compile(r"(?P<module>[\w./-]+\.m?js):(?P<line>\d+):(?P<col>\d+)")


@dataclass(frozen=True, slots=True)
class Position:
    source: str
    line: int  # 1-based, as stack traces count
    column: int  # 1-based


def _vlq(segment: str) -> list[int]:
    values: list[int] = []
    value = shift = 0
    for ch in segment:
        digit = _B64[ch]
        value += (digit & 31) << shift
        if digit & 32:
            shift += 5
            continue
        values.append(-(value >> 1) if value & 1 else value >> 1)
        value = shift = 0
    return values


class SourceMap:
    """One bundle's map; ``shown`` turns a source's absolute path into what a user reads
    (relative to the config's directory when it is inside it)."""

    def __init__(self, raw: dict[str, object], base: Path, root: Path | None = None) -> None:
        sources = raw.get("sources") or []
        assert isinstance(sources, list)
        source_root = str(raw.get("sourceRoot") or "")
        self.sources = [_shown(base / source_root / str(s), root) for s in sources]
        self._lines: list[tuple[list[int], list[tuple[int, int, int]]]] = []
        src = line = col = 0
        mappings = raw.get("mappings") or ""
        assert isinstance(mappings, str)
        for text in mappings.split(";"):
            gen_col = 0
            columns: list[int] = []
            targets: list[tuple[int, int, int]] = []
            for segment in text.split(","):
                if not segment:
                    continue
                v = _vlq(segment)
                gen_col += v[0]
                if len(v) >= 4:
                    src, line, col = src + v[1], line + v[2], col + v[3]
                    columns.append(gen_col)
                    targets.append((src, line, col))
            self._lines.append((columns, targets))

    @classmethod
    def load(cls, path: Path, root: Path | None = None) -> SourceMap | None:
        """The map at ``path``; None if there is none or it cannot be read."""
        try:
            raw = json.loads(path.read_text())
            return cls(raw, path.parent, root)
        except (OSError, ValueError, KeyError, TypeError, AssertionError):
            return None

    def lookup(self, line: int, column: int) -> Position | None:
        """The original position of 1-based (``line``, ``column``) of the bundle."""
        if not 1 <= line <= len(self._lines):
            return None
        columns, targets = self._lines[line - 1]
        i = bisect.bisect_right(columns, column - 1) - 1
        if i < 0:
            return None
        src, src_line, src_col = targets[i]
        if src >= len(self.sources):
            return None
        return Position(self.sources[src], src_line + 1, src_col + 1)


def _shown(path: Path, root: Path | None) -> str:
    absolute = os.path.normpath(path.absolute())
    if root is not None:
        rel = os.path.relpath(absolute, root.absolute())
        if not rel.startswith(".."):
            return rel
    return absolute


def map_stack(stack: str, maps: dict[str, SourceMap], hidden: frozenset[str]) -> str:
    """``stack`` with each frame of a mapped module told in its source; frames of ``hidden``
    modules (ocd's own wrapper) left out."""
    out: list[str] = []
    for line in stack.splitlines():
        m = _FRAME.search(line)
        if m is None or not line.lstrip().startswith("at "):
            out.append(line)
            continue
        module = m.group("module")
        if module in hidden:
            continue
        source_map = maps.get(module)
        pos = source_map.lookup(int(m.group("line")), int(m.group("col"))) if source_map else None
        if pos is not None:
            line = f"{line[: m.start()]}{pos.source}:{pos.line}:{pos.column}{line[m.end() :]}"
        out.append(line)
    return "\n".join(out)
