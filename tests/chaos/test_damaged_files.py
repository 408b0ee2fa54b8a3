"""The quick version of the damaged-files chaos scenario (``chaos/damaged_files.py``)."""

from __future__ import annotations

import pytest

from chaos import damaged_files

pytestmark = pytest.mark.sqlite_only


@pytest.mark.timeout(180)
async def test_every_damaged_file_is_refused_and_the_undamaged_restart_loses_nothing():
    result = await damaged_files.run(quick=True)
    assert result["ok"], result
    assert result["lost"] == 0
    cases = result["cases"]
    assert not cases["undamaged"]["refused"]
    assert cases["undamaged"]["stored"] == cases["undamaged"]["acked"]
    for name, case in cases.items():
        if name != "undamaged":
            assert case["refused"] and case["exit"] == 3, (name, case)
    assert cases["foreign_db"]["unchanged"]
