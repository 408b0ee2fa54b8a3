"""The PostgreSQL record's rules (``ocd.store.postgres.mark``), without a server: what is
recorded is only what the server's WAL has flushed, and the start-up verdicts."""

from __future__ import annotations

import pytest

from ocd.errors import StoreBehind
from ocd.store.postgres.mark import Record, Recorder, judge, read_record, record_path, write_record


def test_a_seq_is_recorded_only_once_the_wal_is_flushed_past_where_it_was_read(tmp_path):
    path = record_path(tmp_path)
    r = Recorder(path, "ab" * 16, 0, "db")
    assert r.start()
    r.observe(10, insert_lsn=1000, flush_lsn=900)  # read, not yet durable
    assert read_record(path) == Record("ab" * 16, 0, "db")
    r.observe(20, insert_lsn=1500, flush_lsn=1200)  # 10 is durable now; 20 not yet
    assert read_record(path) == Record("ab" * 16, 10, "db")
    r.observe(25, insert_lsn=1600, flush_lsn=1600)  # everything read is flushed
    assert read_record(path) == Record("ab" * 16, 25, "db")
    assert r.settled


def test_a_record_never_goes_back(tmp_path):
    path = record_path(tmp_path)
    r = Recorder(path, "ab" * 16, 50, "db")
    r.start()
    r.observe(40, insert_lsn=10, flush_lsn=10)
    assert read_record(path) == Record("ab" * 16, 50, "db")


def test_judge_refuses_another_or_an_older_database_and_accepts_the_same_or_newer(tmp_path):
    path = record_path(tmp_path)
    assert judge(path, None, 0, "db", False) is None  # no record yet: start one
    write_record(path, Record("ab" * 16, 100, "old"))
    assert judge(path, "ab" * 16, 100, "db", False) == Record("ab" * 16, 100, "old")
    assert judge(path, "ab" * 16, 130, "db", False) is not None
    with pytest.raises(StoreBehind) as behind:
        judge(path, "ab" * 16, 70, "db", False)
    assert behind.value.missing == 30 and "30 seq(s) are missing" in str(behind.value)
    with pytest.raises(StoreBehind) as other:
        judge(path, "cd" * 16, 500, "db", False)
    assert other.value.missing is None and "not the one this node last ran on" in str(other.value)
    assert judge(path, "cd" * 16, 500, "db", True) is None  # accepted: the record starts over


def test_an_unreadable_record_starts_over_with_a_warning(tmp_path, caplog):
    path = record_path(tmp_path)
    path.write_text("{not json")
    assert judge(path, "ab" * 16, 0, "db", False) is None
    assert any(r.__dict__.get("event") == "pg_mark_unreadable" for r in caplog.records)
