"""ocd.config: the [sqs] section."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ocd.config import SqsConfig, load_config
from ocd.errors import ConfigError


def _load(tmp_path: Path, sqs: str) -> object:
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(textwrap.dedent(f'[server]\nlisten = "127.0.0.1:8787"\n{sqs}'))
    return load_config(cfg, {})


def test_off_unless_configured(tmp_path: Path) -> None:
    assert _load(tmp_path, "").sqs is None  # type: ignore[attr-defined]


def test_section_parsed(tmp_path: Path) -> None:
    got = _load(
        tmp_path,
        '[sqs]\nlisten = "127.0.0.1:9324"\nregion = "eu-west-1"\npublic_url = "https://sqs.example/"\n',
    )
    assert got.sqs == SqsConfig("127.0.0.1", 9324, "eu-west-1", "https://sqs.example")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('[sqs]\nlisten = "0.0.0.0:9324"\n', "sqs.listen"),
        ('[sqs]\nregion = "Mars"\n', "sqs.region"),
        ('[sqs]\npublic_url = "ftp://x"\n', "sqs.public_url"),
        ("[sqs]\nnope = 1\n", "sqs.nope"),
    ],
)
def test_problems_name_the_key(tmp_path: Path, body: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, body)
    assert [p.key_path for p in info.value.problems] == [key]
