"""A backend's schema migrations: numbered ``.sql`` files in its ``migrations`` folder.

``0001_queues.sql`` upgrades an empty database to schema 1, ``0002_...`` schema 1 to 2, and
so on; the number is the schema version the file leads to. A file is frozen once released:
a change of schema is a new file.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")


def scripts(package: str) -> tuple[str, ...]:
    """The migrations of ``package`` (e.g. ``ocd.store.sqlite``), in order: the script of
    version ``n`` at index ``n - 1``. Numbers must run 1, 2, 3, ... without a gap."""
    folder = resources.files(package) / "migrations"
    found: dict[int, str] = {}
    for entry in folder.iterdir():
        m = _NAME.fullmatch(entry.name)
        if m is None:
            continue
        version = int(m.group(1))
        if version in found:
            raise RuntimeError(f"two migrations of version {version} in {package}")
        found[version] = entry.read_text(encoding="utf-8")
    if sorted(found) != list(range(1, len(found) + 1)):
        raise RuntimeError(f"the migrations of {package} are not numbered 1..n: {sorted(found)}")
    return tuple(found[v] for v in range(1, len(found) + 1))
