"""ocd.files: owner-only modes at creation, whatever the umask, and what an older ocd left."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocd import files
from ocd.files import new_file, private_dir, write_file


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o277], ids=oct)
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_directories_and_their_missing_parents_are_0700(tmp_path: Path, umask: int) -> None:
    d = private_dir(tmp_path / "a" / "b" / "c")
    assert [_mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", d)] == [0o700] * 3


def test_files_are_0600_and_an_existing_file_is_made_so_before_it_is_written(
    tmp_path: Path, umask: int
) -> None:
    assert _mode(new_file(tmp_path / "db")) == 0o600
    with pytest.raises(FileExistsError):
        new_file(tmp_path / "db")
    old = tmp_path / "bundle.js"
    old.write_text("old")
    old.chmod(0o644)  # as an older ocd wrote it
    write_file(old, "new")
    assert (_mode(old), old.read_text()) == (0o600, "new")


def test_an_existing_directory_is_tightened_only_when_it_is_ocds_own(tmp_path: Path) -> None:
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    for d in (theirs, ours):
        d.mkdir()
        d.chmod(0o755)
    private_dir(theirs)
    private_dir(ours, tighten=True)
    assert (_mode(theirs), _mode(ours)) == (0o755, 0o700)


@pytest.mark.parametrize("deep", [False, True], ids=["short-tmpdir", "deep-tmpdir"])
def test_a_socket_directory_is_private_and_holds_its_longest_socket(tmp_path, monkeypatch, deep):
    """Under $TMPDIR as usual, or under /tmp when $TMPDIR lies too deep for a socket's
    path to fit in sun_path: ocd started there failed with "AF_UNIX path too long"."""
    if deep:
        base = tmp_path / ("d" * 60)
        base.mkdir()
    else:
        base = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    d = files.socket_dir("ocd-test-")
    try:
        assert d.parent == (Path("/tmp") if deep else base)
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
        path = d / ("s" * files.SOCKET_NAME_MAX)
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))  # the longest name fits
    finally:
        shutil.rmtree(d)
        if not deep:
            shutil.rmtree(base)
