"""ocd.files: owner-only modes at creation, whatever the umask, and what an older ocd left."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

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
