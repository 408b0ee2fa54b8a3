"""The quick clock-steps chaos scenario: a real daemon under a trickle of sends and pulls,
its wall clock stepped forward and back while running and across a restart and a kill -9."""

from __future__ import annotations

import pytest

from chaos.clock_steps import run


@pytest.mark.timeout(120)
async def test_clock_steps_lose_nothing_and_delay_nothing():
    result = await run(quick=True)
    assert result["lost"] == 0, result
    assert result["ok"], result["recovered"]
