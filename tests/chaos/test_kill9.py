"""The quick version of ``make chaos``'s kill -9 cycles (chaos/kill9.py): a few kill -9 of a
real daemon under binding, REST and SQS load lose no confirmed send, and every duplicate is
one a kill explains."""

from __future__ import annotations

import pytest

from chaos import kill9


@pytest.mark.timeout(240)
async def test_kill_9_cycles_under_mixed_load_lose_nothing_and_explain_every_duplicate():
    result = await kill9.run(quick=True)
    assert result["lost"] == 0, result
    assert result["unexplained_duplicates"] == 0, result
    assert result["fifo_out_of_order"] == 0, result
    assert result["kills"] >= 4 and result["ok"], result
    assert min(result["confirmed"].values()) > 0, result  # every surface carried load


@pytest.mark.timeout(240)
async def test_kill_9_of_one_of_two_postgres_nodes_loses_nothing(pg_dsn):
    result = await kill9.run_pg(quick=True, dsn=pg_dsn)
    assert result["lost"] == 0, result
    assert result["unexplained_duplicates"] == 0, result
    assert result["fifo_out_of_order"] == 0, result
    assert result["ok"] and result["nodes"] == 2, result
    assert min(result["confirmed"].values()) > 0, result
