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


_TOKEN = "0" * 64
_ID = 'sqs_account_id = "111122223333"\nsqs_keys = '
_AK = 'access_key_id = "AKIAACMEENVKEY00"'


def _accounts(tmp_path: Path, account: str, sqs: str = "", environ: dict[str, str] | None = None):
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        '[server]\nlisten = "127.0.0.1:8787"\n'
        f'{sqs}\n[[accounts]]\nid = "acme"\ntoken_sha256 = ["{_TOKEN}"]\n{account}'
    )
    return load_config(cfg, environ or {})


def test_account_sqs_keys_read_their_secret_from_env_or_file(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("file-secret\n")
    (tmp_path / "secret.txt").chmod(0o600)
    got = _accounts(
        tmp_path,
        'sqs_account_id = "111122223333"\n'
        'sqs_keys = [{ access_key_id = "AKIAACMEENVKEY00", secret_env = "ACME_SECRET" },\n'
        '            { access_key_id = "AKIAACMEFILEKEY0", secret_file = "secret.txt" }]\n',
        environ={"ACME_SECRET": "env-secret"},
    )
    (acme,) = got.accounts  # type: ignore[attr-defined]
    assert acme.sqs_account_id == "111122223333"
    assert [(k.access_key_id, k.secret) for k in acme.sqs_keys] == [
        ("AKIAACMEENVKEY00", "env-secret"),
        ("AKIAACMEFILEKEY0", "file-secret"),
    ]
    assert "env-secret" not in repr(acme)  # secrets stay out of logs and tracebacks


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660], ids=oct)
def test_a_secret_file_open_to_group_or_others_is_refused(tmp_path: Path, mode: int) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("file-secret\n")
    secret.chmod(mode)
    with pytest.raises(ConfigError) as info:
        _accounts(tmp_path, _ID + f'[{{ {_AK}, secret_file = "secret.txt" }}]\n')
    (problem,) = info.value.problems
    assert problem.key_path == "accounts[0].sqs_keys[0].secret_file"
    said = str(problem)
    assert str(tmp_path / "ocd.toml") in said  # the config file
    assert str(secret) in said  # the secret file
    assert f"got {mode:04o}" in said
    assert "expected 0600 or 0400" in said
    assert "file-secret" not in said


def test_with_accounts_the_sqs_listener_may_leave_loopback(tmp_path: Path) -> None:
    got = _accounts(tmp_path, "", sqs='[sqs]\nlisten = "0.0.0.0:9324"\n')
    assert got.sqs.host == "0.0.0.0"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("account", "key", "says"),
    [
        ('sqs_account_id = "12345"\n', "accounts[0].sqs_account_id", "12-digit"),
        ('sqs_account_id = "000000000000"\n', "accounts[0].sqs_account_id", "local"),
        (
            _ID + '[{ access_key_id = "short", secret_env = "S" }]\n',
            "accounts[0].sqs_keys[0].access_key_id",
            "access key id",
        ),
        (
            _ID + f'[{{ {_AK}, secret_env = "UNSET" }}]\n',
            "accounts[0].sqs_keys[0].secret_env",
            '"UNSET" is not set',
        ),
        (
            _ID + f"[{{ {_AK} }}]\n",
            "accounts[0].sqs_keys[0]",
            "exactly one",
        ),
        (
            _ID + f'[{{ {_AK}, secret = "x" }}]\n',
            "accounts[0].sqs_keys[0].secret",
            "unknown key",
        ),
        (
            _ID + f'[{{ {_AK}, secret_file = "missing.txt" }}]\n',
            "accounts[0].sqs_keys[0].secret_file",
            "cannot read",
        ),
        (
            'sqs_keys = [{ access_key_id = "AKIAACMEENVKEY00", secret_env = "S" }]\n',
            "accounts[0].sqs_keys",
            "sqs_account_id",
        ),
    ],
)
def test_sqs_key_problems_name_the_key_path(
    tmp_path: Path, account: str, key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _accounts(tmp_path, account, environ={"S": "s"})
    found = {p.key_path: p.message for p in info.value.problems}
    assert key in found and says in found[key], found


def test_an_sqs_account_id_or_key_of_two_accounts_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "ocd.toml"
    key = '{ access_key_id = "AKIAACMEENVKEY00", secret_env = "S" }'
    cfg.write_text(
        '[server]\nlisten = "127.0.0.1:8787"\n'
        f'[[accounts]]\nid = "a"\ntoken_sha256 = ["{"1" * 64}"]\nsqs_account_id = "111122223333"\n'
        f"sqs_keys = [{key}]\n"
        f'[[accounts]]\nid = "b"\ntoken_sha256 = ["{"2" * 64}"]\nsqs_account_id = "111122223333"\n'
        f"sqs_keys = [{key}]\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(cfg, {"S": "s"})
    assert [p.key_path for p in info.value.problems] == [
        "accounts[1].sqs_account_id",
        "accounts[1].sqs_keys[0].access_key_id",
    ]
