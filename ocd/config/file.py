"""Reading a config or wrangler file into checked tables, with every problem recorded.

Schema-agnostic: ``File`` reads TOML, JSON or JSONC and ``Table`` gives typed access to
one table; both record a Problem (file, key path, expected, got) instead of raising, so a
caller can report everything wrong at once. What the keys mean is ``ocd.config``'s business.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from ocd.errors import Problem

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _join(path: str, key: str) -> str:
    key = key if _BARE_KEY.fullmatch(key) else json.dumps(key)
    return f"{path}.{key}" if path else key


def _show(value: object) -> str:
    if isinstance(value, datetime.date | datetime.time):  # TOML dates are written unquoted
        return value.isoformat()
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def absolute_path(base: Path, value: str) -> Path:
    """``value`` resolved against directory ``base``, normalised but symlinks kept."""
    return Path(os.path.normpath(os.path.join(base, value)))


def read_secret_file(path: Path) -> str:
    """The secret held in the file at ``path``; ValueError saying why it cannot be used."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        value = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read {path}: {e}") from None
    if mode & 0o077:  # refused, as ssh refuses a private key others can read
        raise ValueError(
            f"{path} is open to group or others: expected 0600 or 0400 (owner only), "
            f"got {mode:04o}; run chmod 600 {path}"
        )
    if not value:
        raise ValueError(f"{path} is empty")
    return value


class File:
    """A config or wrangler file: where its problems go and how its relative paths resolve."""

    def __init__(self, shown: Path, path: Path, problems: list[Problem], wrangler: bool) -> None:
        self.shown = shown  # as the user named it, for messages
        self.path = path
        self.problems = problems
        self.wrangler = wrangler
        self.toml = not wrangler or path.suffix == ".toml"
        self.table_word, self.noun = ("a table", "table") if self.toml else ("an object", "object")

    def problem(self, key_path: str, message: str) -> None:
        self.problems.append(Problem(self.shown, key_path, message))

    def expected(self, key_path: str, what: str, got: object) -> None:
        self.problem(key_path, f"expected {what}, got {_show(got)}")

    def read(self, allowed: Collection[str] | None) -> Table | None:
        try:
            text = self.path.read_text(encoding="utf-8")
            data = tomllib.loads(text) if self.toml else json.loads(_strip_jsonc(text))
        except FileNotFoundError:
            self.problem("", "file not found")
        except (OSError, UnicodeDecodeError) as e:
            self.problem("", f"cannot read file: {e}")
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
            self.problem("", f"invalid {'TOML' if self.toml else 'JSON'}: {e}")
        else:
            return self.table(data, "", allowed)
        return None

    def table(
        self,
        value: object,
        path: str,
        allowed: Collection[str] | None,  # None: any key
        required: Collection[str] = (),
    ) -> Table | None:
        if not isinstance(value, dict):
            self.expected(path, self.table_word, value)
            return None
        for key in value:
            if allowed is not None and key not in allowed:
                self.problem(_join(path, key), f'unknown key "{key}"')
        for key in required:
            if key not in value:
                self.problem(path, f'missing required key "{key}"')
        return Table(self, value, path)


class Table:
    """Typed access to one table; a wrong value is recorded as a problem, never raised."""

    def __init__(self, file: File, data: dict[str, Any], path: str) -> None:
        self.file = file
        self.data = data
        self.path = path

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, default: object = None) -> Any:
        return self.data.get(key, default)

    def key_path(self, key: str) -> str:
        return _join(self.path, key)

    def problem(self, key: str, message: str) -> None:
        self.file.problem(self.key_path(key), message)

    def expected(self, key: str, what: str, got: object) -> None:
        self.file.expected(self.key_path(key), what, got)

    def table(self, key: str, allowed: Collection[str] | None) -> Table | None:
        return self.file.table(self.data.get(key, {}), self.key_path(key), allowed)

    def items(self, key: str) -> list[tuple[str, object]]:
        """(key path, item) for each item of the array at ``key``; absent means empty."""
        value = self.data.get(key, [])
        if not isinstance(value, list):
            self.expected(key, "an array", value)
            return []
        return [(f"{self.key_path(key)}[{i}]", item) for i, item in enumerate(value)]

    def text(self, key: str, ok: Callable[[str], object], what: str) -> str | None:
        """The string at ``key`` if ``ok`` accepts it; None if absent or wrong."""
        value = self.data.get(key)
        if value is None or (isinstance(value, str) and ok(value)):
            return value
        self.expected(key, what, value)
        return None

    def integer(self, key: str, lo: int, hi: int, default: int) -> int:
        value = self.data.get(key, default)
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
        self.expected(key, f"an integer {lo}..{hi}", value)
        return default

    def number(self, key: str, lo: int, hi: int, default: float) -> float:
        value = self.data.get(key, default)
        if isinstance(value, int | float) and not isinstance(value, bool) and lo <= value <= hi:
            return float(value)
        self.expected(key, f"a number {lo}..{hi}", value)
        return default

    def boolean(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if isinstance(value, bool):
            return value
        self.expected(key, "true or false", value)
        return default


def _strip_jsonc(text: str) -> str:
    """JSONC to JSON: blank out comments and trailing commas, keeping every line and column."""
    out = list(text)
    last = -1  # index of the last character that is neither whitespace nor comment
    i = 0
    while i < len(text):
        if text[i] == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            last, i = end, end + 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:  # unterminated: left in place for json to report
                break
            end += 2
        else:
            if text[i] in "]}" and last >= 0 and out[last] == ",":
                out[last] = " "
            if not text[i].isspace():
                last = i
            i += 1
            continue
        out[i:end] = [c if c == "\n" else " " for c in text[i:end]]
        i = end
    return "".join(out)


def parse_listen(listen: str) -> tuple[str, int] | None:
    """(host, port) from "IPv4:port", "localhost:port" or "[IPv6]:port"; None if malformed."""
    if listen.startswith("["):
        host, sep, port = listen[1:].partition("]:")
        if not sep or not isinstance(_ip(host), ipaddress.IPv6Address):
            return None
    else:
        host, sep, port = listen.rpartition(":")
        if not sep or (host != "localhost" and not isinstance(_ip(host), ipaddress.IPv4Address)):
            return None
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and int(port) <= 65535):
        return None
    return host, int(port)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (as ``parse_listen`` returns it) only accepts local connections."""
    ip = _ip(host)
    return host == "localhost" or (ip is not None and ip.is_loopback)
