"""The dashboard's session cookie, token check and CSRF rule (pure functions)."""

from __future__ import annotations

import hashlib

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from ocd.clock import SLEW_DIVISOR, SteadyClock
from ocd.config import AccountConfig
from ocd.http.browsers import same_origin
from ocd.http.ui.auth import COOKIE, SESSION_S, Gate, Viewer, identify, sign, verify

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


TOKEN_ID = "0" * 12  # the configured token's: a session lasts as long as its token


class Stepped:
    """A wall clock and a monotonic clock (nanoseconds) that move when the test says."""

    def __init__(self) -> None:
        self.wall = 1_800_000_000 * 10**9
        self.mono = 5 * 10**9

    def run(self, seconds: float) -> None:
        self.wall += int(seconds * 1e9)
        self.mono += int(seconds * 1e9)

    def step_wall(self, seconds: float) -> None:
        self.wall += int(seconds * 1e9)


def _session(gate: Gate) -> str:
    response = web.Response()
    gate.set_cookie(
        make_mocked_request("POST", "/__ocd/ui/login"), response, Viewer("acme", TOKEN_ID, False)
    )
    return response.cookies[COOKIE].value


def _viewer(gate: Gate, cookie: str) -> Viewer | None:
    return gate.viewer(
        make_mocked_request("GET", "/__ocd/ui/", headers={"Cookie": f"{COOKIE}={cookie}"})
    )


def _gate(t: Stepped) -> Gate:
    clock = SteadyClock(wall_ns=lambda: t.wall, monotonic_ns=lambda: t.mono)
    return Gate([AccountConfig("acme", ("00" * 32,))], False, KEY, "/__ocd/", clock)


def test_a_wall_clock_step_forward_does_not_log_the_dashboard_user_out():
    t = Stepped()
    gate = _gate(t)
    cookie = _session(gate)
    t.run(60)
    t.step_wall(SESSION_S + 3600)  # an NTP step or a resumed VM: 13 h on the wall clock
    t.run(60)
    assert _viewer(gate, cookie) == Viewer("acme", TOKEN_ID, False)


def test_a_wall_clock_step_back_does_not_lengthen_a_session_by_the_step():
    """Stepped back 6 h, the wall clock would keep a session for 18 h; the daemon's clock
    runs at most 1/SLEW_DIVISOR slow while it catches up, so 12 h and that much."""
    t = Stepped()
    gate = _gate(t)
    cookie = _session(gate)
    t.step_wall(-6 * 3600)
    t.run(SESSION_S - 60)
    assert _viewer(gate, cookie) is not None  # still within its 12 h
    t.run(SESSION_S / (1 - 1 / SLEW_DIVISOR) - SESSION_S + 120)
    assert _viewer(gate, cookie) is None  # the 6 h step did not buy 6 more hours


def test_a_wall_clock_step_forward_does_not_shorten_a_session_by_the_step():
    t = Stepped()
    gate = _gate(t)
    cookie = _session(gate)
    t.step_wall(6 * 3600)
    t.run(SESSION_S * (1 - 1 / SLEW_DIVISOR) - 60)
    assert _viewer(gate, cookie) is not None  # the wall clock says 18 h have gone
    t.run(SESSION_S)
    assert _viewer(gate, cookie) is None
