"""Lease ids and peek refs: the format issued (unchanged, so ids issued before an upgrade
still check), and every way a token is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
from types import SimpleNamespace
from typing import Any

import pytest

from ocd.pull import Signer, Token

KEY = b"k" * 32
QUEUE: Any = SimpleNamespace(account="acme", queue_id="q1")
OTHER_QUEUE: Any = SimpleNamespace(account="acme", queue_id="q2")
OTHER_ACCOUNT: Any = SimpleNamespace(account="other", queue_id="q1")


def _reference(kind: str, seq: int, mid: str, attempts: int) -> str:
    """A token as ocd has always issued it: base64url(payload).base64url(HMAC-SHA256)."""
    payload = f"{kind}|acme|q1|{seq}|{mid}|{attempts}".encode()
    mac = hmac.new(KEY, payload, hashlib.sha256).digest()

    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    return f"{b64(payload)}.{b64(mac)}"


@pytest.mark.parametrize("seq", [1, 12, 123, 1234, 123456789])  # every padding length
def test_issued_as_before_and_checked(seq: int) -> None:
    s = Signer(KEY)
    token = s.issue("lease", QUEUE, seq, "abc", 3)
    assert token == _reference("lease", seq, "abc", 3)
    assert s.check("lease", QUEUE, token) == Token(seq, "abc", 3)
    assert s.check("lease", QUEUE, token).seq == seq  # type: ignore[union-attr]


def test_refused() -> None:
    s = Signer(KEY)
    token = s.issue("lease", QUEUE, 7, "abc", 1)
    head, mac = token.split(".")
    assert s.check("ref", QUEUE, token) is None  # another kind
    assert s.check("lease", OTHER_QUEUE, token) is None
    assert s.check("lease", OTHER_ACCOUNT, token) is None
    assert Signer(b"x" * 32).check("lease", QUEUE, token) is None  # another key
    flipped = mac[:-2] + ("A" if mac[-2] != "A" else "B") + mac[-1]
    for bad in (
        f"{head}.{flipped}",
        f"{head}x.{mac}",
        f"{head}.{mac}.x",
        head,
        "",
        ".",
        f"{head}.{mac}é",
        f"{head}.{mac}" + "A" * 600,
        f"{head}.{mac[:-1]}",
        None,
        42,
        f"{_reference('lease', 7, 'abd', 1).split('.')[0]}.{mac}",  # another message
        f"{_reference('lease', 8, 'abc', 1).split('.')[0]}.{mac}",
        f"{_reference('lease', 7, 'abc', 2).split('.')[0]}.{mac}",  # another delivery
    ):
        assert s.check("lease", QUEUE, bad) is None, bad
    # a payload that is signed but not six fields, or not numbers where numbers go
    for payload in (b"lease|acme|q1|7|abc", b"lease|acme|q1|x|abc|1"):
        mac2 = hmac.new(KEY, payload, hashlib.sha256).digest()
        parts = (base64.urlsafe_b64encode(b).rstrip(b"=").decode() for b in (payload, mac2))
        forged = ".".join(parts)
        assert s.check("lease", QUEUE, forged) is None
