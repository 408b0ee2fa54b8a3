"""Owner-only files and directories. What ocd writes holds message bodies, the dashboard's
session and lease-signing keys, or a start's bridge secret, so nothing it creates is open to
group or others, whatever the umask: each mode is given at creation (a umask only takes bits
away), never by a chmod after the data is in, so there is no moment when it is readable."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700
# For the programs ocd runs (esbuild, workerd): what they create (bundles, unix sockets) is
# as private as what ocd creates itself.
CHILD_UMASK = 0o077
LOOSE_BITS = 0o077  # any permission for group or others
# The longest path a unix socket can be bound at: sun_path holds 108 bytes, its NUL included.
SOCKET_PATH_MAX = 107
# The longest socket name (``http_<worker>.sock``: a worker name has at most 63 characters).
SOCKET_NAME_MAX = 73


def private_dir(path: Path, tighten: bool = False) -> Path:
    """``path`` and its missing parents, created 0700. An existing directory is left as it
    is unless ``tighten`` (for a directory only ocd writes, such as ``<data_dir>/workerd``,
    which an older ocd created with the umask's mode)."""
    missing: list[Path] = []
    p = path
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            if not d.is_dir():
                raise
            continue
        os.chmod(d, DIR_MODE)  # exactly 0700 even under a umask that takes owner bits away
    if tighten and path not in missing and path.stat().st_mode & LOOSE_BITS:
        os.chmod(path, DIR_MODE)
    return path


def new_file(path: Path) -> Path:
    """A new, empty file made 0600 (``FileExistsError`` if one is there), for SQLite to
    open as a database: SQLite creates its files with the umask's mode, and its journal,
    WAL and shared-memory files with the database file's own."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path


def write_file(path: Path, data: bytes | str) -> None:
    """``data`` as the whole of ``path``, which is made 0600 (created so, or changed before
    anything is written if it was there already)."""
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def socket_dir(prefix: str, longest: int = SOCKET_NAME_MAX) -> Path:
    """A new private directory (0700, ``tempfile.mkdtemp``) for unix sockets named with at
    most ``longest`` characters: under ``$TMPDIR`` as for any temporary file, or under
    ``/tmp`` when ``$TMPDIR`` lies so deep that a socket's path would not fit in sun_path
    (binding one would fail with "AF_UNIX path too long")."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    if len(os.fsencode(d)) + 1 + longest <= SOCKET_PATH_MAX:
        return d
    d.rmdir()
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
