"""The quick version of the chaos suite's hostile-connections scenario (chaos/hostile.py):
a real ``ocd serve`` at 256 descriptors, flooded with 300 half-open connections and sent
gzip bombs while a client keeps pushing."""

from __future__ import annotations

import pytest

from chaos import hostile


@pytest.mark.timeout(120)
async def test_hostile_connections_lose_nothing_and_lock_nobody_out() -> None:
    result = await hostile.run(quick=True)
    assert result["ok"], result
    assert result["lost"] == 0
    assert result["send_errors"] == 0 and result["acked_sends"] > 0
    assert result["half_open_left_open"] == 0
    assert result["bomb_statuses"] == [403, 413]
