"""The quick version of ``make chaos``'s PostgreSQL outage (chaos/pg_outage.py): the server
stopped for a few seconds under mixed REST and binding load, then started again, loses no
accepted send; sends are answered 503 meanwhile and everything resumes on its own."""

from __future__ import annotations

import pytest

from chaos import pg_outage


@pytest.mark.timeout(180)
async def test_a_postgres_outage_under_load_loses_nothing_and_everything_resumes(
    pg_cluster, pg_dsn
):
    if not pg_cluster.managed:
        pytest.skip("the PostgreSQL server is not this test run's own: it cannot be stopped")
    result = await pg_outage.run(quick=True, cluster=pg_cluster, dsn=pg_dsn)
    assert result["lost"] == 0, result
    assert result["ok"], result
    assert result["refused_503"] > 0 and result["rest_sends_accepted"] > 0, result
    assert result["binding_sends_accepted"] > 0, result
