"""The dashboard's session cookie, token check and CSRF rule (pure functions)."""

from __future__ import annotations

import hashlib

from aiohttp.test_utils import make_mocked_request

from ocd.config import AccountConfig
from ocd.http.ui.auth import Viewer, identify, same_origin, sign, verify

KEY = b"k" * 32


def test_a_signed_session_verifies_and_a_tampered_or_expired_one_does_not():
    v = Viewer("acme", "abc123", True)
    value = sign(KEY, v, now_s=1000)
    assert verify(KEY, value, now_s=1001) == v
    raw, _, mac = value.partition(".")
    assert verify(KEY, raw + "x." + mac, now_s=1001) is None
    assert verify(b"other" * 8, value, now_s=1001) is None
    assert verify(KEY, value, now_s=1000 + 13 * 3600) is None
    assert verify(KEY, "garbage", now_s=1001) is None


def test_identify_finds_the_account_and_role_of_a_token():
    admin, read = "t-admin", "t-read"
    h = {t: hashlib.sha256(t.encode()).hexdigest() for t in (admin, read)}
    accounts = [AccountConfig("acme", (h[admin], h[read]), (h[read],))]
    assert identify(accounts, admin) == Viewer("acme", h[admin][:12], False)
    assert identify(accounts, read) == Viewer("acme", h[read][:12], True)
    assert identify(accounts, "nope") is None
    assert identify(accounts, "") is None


def test_a_change_needs_same_origin_by_fetch_metadata_or_origin():
    def req(**headers: str):
        return make_mocked_request("POST", "/__ocd/ui/x", headers={"Host": "h:1", **headers})

    assert same_origin(req(**{"Sec-Fetch-Site": "same-origin"}))
    assert not same_origin(req(**{"Sec-Fetch-Site": "same-site"}))
    assert not same_origin(req(**{"Sec-Fetch-Site": "cross-site", "Origin": "http://h:1"}))
    assert same_origin(req(Origin="http://h:1"))
    assert not same_origin(req(Origin="http://evil"))
    assert not same_origin(req())
