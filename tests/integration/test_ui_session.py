"""The dashboard's sessions are timed by the daemon's clock, not by ``time.time()``: an
in-process daemon on an injected clock, logged into over real HTTP."""

from __future__ import annotations

import hashlib

from ocd.http.ui.auth import COOKIE, SESSION_S
from tests.helpers import FakeClock

TOKEN = "ui-session-token"
ACCOUNTS = f"""
[[accounts]]
id = "local"
token_sha256 = ["{hashlib.sha256(TOKEN.encode()).hexdigest()}"]
"""
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}


async def test_a_dashboard_session_ends_when_the_daemons_clock_says_so(start_daemon):
    clock = FakeClock()
    running = await start_daemon(queues=ACCOUNTS, clock=clock)
    ui = running.base + "/__ocd/ui"
    s = running.session
    async with s.post(
        ui + "/login", data={"token": TOKEN}, headers=SAME_ORIGIN, allow_redirects=False
    ) as r:
        assert r.status == 303, await r.text()
        # the client's jar keeps no cookie of an IP address: the test carries it
        session = {"Cookie": f"{COOKIE}={r.cookies[COOKIE].value}"}
    async with s.get(ui + "/", headers=session, allow_redirects=False) as r:
        assert r.status == 200
    clock.advance(SESSION_S - 60)  # hours on the daemon's clock, seconds on the wall's
    async with s.get(ui + "/", headers=session, allow_redirects=False) as r:
        assert r.status == 200
    clock.advance(120)
    async with s.get(ui + "/", headers=session, allow_redirects=False) as r:
        assert r.status == 303 and "/login" in r.headers["Location"]
