"""The PostgreSQL test harness gives a working, isolated, restartable server."""

from __future__ import annotations

import pytest

from tests import pg

pytestmark = pytest.mark.timeout(60)


def test_cluster_accepts_connections(pg_cluster: pg.Cluster) -> None:
    assert pg_cluster.psql("SELECT 1") == "1"
    assert int(pg_cluster.psql("SHOW server_version_num")) >= 150000


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_gets_a_fresh_database(pg_cluster: pg.Cluster, pg_dsn: str, run: int) -> None:
    # Were the database shared, the second run would find the first run's table.
    assert pg_cluster.psql("SELECT current_database()", dsn=pg_dsn).startswith("ocd_t_")
    assert pg_cluster.psql("SELECT to_regclass('marker') IS NULL", dsn=pg_dsn) == "t"
    pg_cluster.psql("CREATE TABLE marker (run int)", dsn=pg_dsn)


def test_databases_are_distinct_and_dropped(pg_cluster: pg.Cluster, pg_dsn: str) -> None:
    other = pg_cluster.create_database("ocd_t_other")
    try:
        pg_cluster.psql("CREATE TABLE only_here (x int)", dsn=pg_dsn)
        assert pg_cluster.psql("SELECT to_regclass('only_here') IS NULL", dsn=other) == "t"
    finally:
        pg_cluster.drop_database("ocd_t_other")
    exists = "SELECT count(*) FROM pg_database WHERE datname = 'ocd_t_other'"
    assert pg_cluster.psql(exists) == "0"


def test_restart_comes_back_on_the_same_port(pg_cluster: pg.Cluster, pg_dsn: str) -> None:
    if not pg_cluster.managed:
        # Worded without "postgres" so OCD_REQUIRE_POSTGRES=1 doesn't count it as missing.
        pytest.skip("the server comes from a DSN, not the harness: it cannot be restarted")
    started = pg_cluster.psql("SELECT pg_postmaster_start_time()")
    pg_cluster.psql("CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)", dsn=pg_dsn)

    pg_cluster.restart()

    assert pg_cluster.port == int(pg_cluster.psql("SHOW port"))
    assert pg_cluster.psql("SELECT pg_postmaster_start_time()") != started
    assert pg_cluster.psql("SELECT x FROM kept", dsn=pg_dsn) == "1"


def test_immediate_stop_keeps_committed_rows(pg_cluster: pg.Cluster, pg_dsn: str) -> None:
    if not pg_cluster.managed:
        pytest.skip("the server comes from a DSN, not the harness: it cannot be stopped")
    pg_cluster.psql("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)", dsn=pg_dsn)

    pg_cluster.stop_immediate()
    assert not pg_cluster.accepts_connections()
    pg_cluster.start()

    assert pg_cluster.psql("SELECT x FROM kept", dsn=pg_dsn) == "7"


def test_store_config_toml() -> None:
    assert pg.store_config_toml("sqlite", None) == ""
    dsn = "postgresql://ocd@127.0.0.1:5432/ocd_t_x"
    assert pg.store_config_toml("postgres", dsn) == (
        f'[store]\nbackend = "postgres"\ndsn = "{dsn}"\n'
    )
    with pytest.raises(ValueError):
        pg.store_config_toml("postgres", None)
