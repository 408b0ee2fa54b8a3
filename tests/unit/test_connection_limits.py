"""The [server] connection limits in the config, and the pieces of ocd.http.guard and
ocd.http.body that need no socket."""

from __future__ import annotations

import gzip
import resource
import zlib
from pathlib import Path

import pytest

from ocd.config import load_config
from ocd.errors import ConfigError
from ocd.http.body import BodyError, _Inflater
from ocd.http.guard import DESCRIPTOR_RESERVE, connection_cap, raise_nofile


def _problems(tmp_path: Path, server: str) -> list[tuple[str, str]]:
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(f'[server]\nlisten = "127.0.0.1:8787"\n{server}\n')
    with pytest.raises(ConfigError) as info:
        load_config(cfg, {})
    return [(p.key_path, p.message) for p in info.value.problems]


def test_limits_default_and_parse(tmp_path: Path) -> None:
    cfg = tmp_path / "ocd.toml"
    cfg.write_text('[server]\nlisten = "127.0.0.1:8787"\n')
    s = load_config(cfg, {}).server
    assert (s.header_timeout_s, s.body_timeout_s, s.keepalive_timeout_s) == (10.0, 30.0, 60.0)
    assert s.max_connections is None
    cfg.write_text(
        '[server]\nlisten = "127.0.0.1:8787"\nheader_timeout = 2\nbody_timeout = 5.5\n'
        "keepalive_timeout = 3\nmax_connections = 200\n"
    )
    s = load_config(cfg, {}).server
    assert (s.header_timeout_s, s.body_timeout_s, s.keepalive_timeout_s) == (2.0, 5.5, 3.0)
    assert s.max_connections == 200


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("header_timeout = 0", "expected a number 1..3600, got 0"),
        ("body_timeout = '30'", 'expected a number 1..3600, got "30"'),
        ("keepalive_timeout = true", "expected a number 1..86400, got true"),
        ("max_connections = 8", "expected an integer 16..1000000, got 8"),
        ("max_connections = 100.5", "expected an integer 16..1000000, got 100.5"),
    ],
)
def test_limit_errors_name_the_key_path(tmp_path: Path, setting: str, message: str) -> None:
    key = setting.split(" = ")[0]
    assert _problems(tmp_path, setting) == [(f"server.{key}", message)]


def test_the_cap_is_derived_from_the_descriptor_limit_and_never_exceeds_it() -> None:
    assert connection_cap(None, 1 << 20) == 1000
    assert connection_cap(None, 256) == 256 - DESCRIPTOR_RESERVE
    assert connection_cap(5000, 1024) == 1024 - DESCRIPTOR_RESERVE
    assert connection_cap(100, 1024) == 100


def test_raise_nofile_lifts_the_soft_limit_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before, now = raise_nofile()
    assert before == soft
    assert now == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert now == hard or hard == resource.RLIM_INFINITY or hard > 1 << 20


def _inflate(coding: str, data: bytes, limit: int, step: int = 7) -> bytes:
    inf = _Inflater(coding, limit)
    out = b"".join(b"".join(inf.feed(data[i : i + step])) for i in range(0, len(data), step))
    inf.finish()
    return out


def test_inflater_reads_gzip_members_and_both_deflate_forms_in_small_pieces() -> None:
    text = b"hello world " * 100
    assert _inflate("gzip", gzip.compress(text) + gzip.compress(text), 1 << 20) == text * 2
    assert _inflate("deflate", zlib.compress(text), 1 << 20) == text
    assert _inflate("deflate", zlib.compress(text, wbits=-15), 1 << 20) == text


def test_inflater_stops_one_byte_past_the_limit() -> None:
    inf = _Inflater("gzip", 1000)
    with pytest.raises(BodyError) as info:
        inf.feed(gzip.compress(bytes(10 << 20)))  # 10 MiB of zeros in one piece
    assert info.value.status == 413 and inf.out == 1001


@pytest.mark.parametrize(
    "data",
    [
        gzip.compress(b"x" * 100, mtime=0)[:-4],
        b"not gzip at all",
        gzip.compress(b"x", mtime=0) + b"trailing",
    ],
    ids=["truncated", "not-gzip", "trailing-garbage"],  # the same in every pytest-xdist worker
)
def test_inflater_refuses_broken_gzip_with_400(data: bytes) -> None:
    with pytest.raises((BodyError, zlib.error)) as info:
        _inflate("gzip", data, 1 << 20)
    if isinstance(info.value, BodyError):
        assert info.value.status == 400
