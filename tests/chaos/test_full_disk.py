"""The quick full-disk chaos run: fill a small tmpfs data_dir under mixed load, free it."""

from __future__ import annotations

import asyncio

import pytest

from chaos import full_disk

pytestmark = [pytest.mark.timeout(120), pytest.mark.sqlite_only]


def test_a_full_disk_under_mixed_load_loses_nothing_and_recovers():
    result = asyncio.run(full_disk.run(quick=True))
    if "skipped" in result:
        pytest.skip(result["skipped"])
    assert result["lost"] == 0 and result["ok"], result
