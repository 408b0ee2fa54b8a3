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


OTHER = "ui-session-other-token"


def _accounts(*entries: tuple[str, str, bool]) -> str:
    """``[[accounts]]`` for (account, token, read-only) entries."""
    out = []
    for account in dict.fromkeys(a for a, _, _ in entries):
        tokens = ", ".join(
            f'{{ sha256 = "{hashlib.sha256(t.encode()).hexdigest()}", '
            f'role = "{"read" if ro else "admin"}" }}'
            for a, t, ro in entries
            if a == account
        )
        out.append(f'[[accounts]]\nid = "{account}"\ntoken_sha256 = [{tokens}]\n')
    return "".join(out)


async def _login(running, token: str) -> dict[str, str]:
    ui = running.base + "/__ocd/ui"
    async with running.session.post(
        ui + "/login", data={"token": token}, headers=SAME_ORIGIN, allow_redirects=False
    ) as r:
        assert r.status == 303, await r.text()
        return {"Cookie": f"{COOKIE}={r.cookies[COOKIE].value}", **SAME_ORIGIN}


async def _reload_with(running, accounts: str, before: str) -> None:
    path = running.daemon.config.path
    path.write_text(path.read_text().replace(before, accounts))
    assert await running.daemon.reload()


async def _pause(running, session: dict[str, str]) -> int:
    url = running.base + "/__ocd/ui/queues/jobs/pause"
    async with running.session.post(url, headers=session, allow_redirects=False) as r:
        return r.status


async def test_a_session_ends_when_a_reload_removes_its_token(start_daemon):
    accounts = _accounts(("local", TOKEN, False), ("local", OTHER, False))
    running = await start_daemon(queues=accounts)
    ui = running.base + "/__ocd/ui"
    session = await _login(running, TOKEN)
    async with running.session.get(ui + "/", headers=session, allow_redirects=False) as r:
        assert r.status == 200
    assert await _pause(running, session) == 303  # done, back to the queue's page
    await _reload_with(running, _accounts(("local", OTHER, False)), accounts)
    async with running.session.get(ui + "/", headers=session, allow_redirects=False) as r:
        assert r.status == 303 and "/login" in r.headers["Location"]
    assert await _pause(running, session) == 403
    async with running.session.get(
        ui + "/queues/jobs", headers=session, allow_redirects=False
    ) as r:
        assert r.status == 303
    # the token that stayed still logs in
    assert await _pause(running, await _login(running, OTHER)) == 303


async def test_a_session_whose_token_is_lowered_to_read_becomes_read_only(start_daemon):
    accounts = _accounts(("local", TOKEN, False))
    running = await start_daemon(queues=accounts)
    ui = running.base + "/__ocd/ui"
    session = await _login(running, TOKEN)
    await _reload_with(running, _accounts(("local", TOKEN, True)), accounts)
    async with running.session.get(ui + "/queues/jobs", headers=session) as r:
        assert r.status == 200
    assert await _pause(running, session) == 403


async def test_only_the_operator_reloads_from_the_dashboard(start_daemon):
    accounts = _accounts(("local", TOKEN, False), ("other", OTHER, False))
    running = await start_daemon(queues=accounts)
    ui = running.base + "/__ocd/ui"
    assert await running.daemon.reload()  # by the operator: SIGHUP
    tenant = await _login(running, OTHER)
    async with running.session.post(
        ui + "/workers/reload", headers=tenant, allow_redirects=False
    ) as r:
        assert r.status == 403
    async with running.session.get(ui + "/workers", headers=tenant) as r:
        page = await r.text()
        assert r.status == 200 and "applied" in page
        assert "worker app" not in page and 'id="reload"' not in page  # another tenant's
    # alone on the daemon, an account's admin is its operator
    single = _accounts(("local", TOKEN, False))
    await _reload_with(running, single, accounts)
    operator = await _login(running, TOKEN)
    async with running.session.post(
        ui + "/workers/reload", headers=operator, allow_redirects=False
    ) as r:
        assert r.status == 303 and "Reload%20applied" in r.headers["Location"]
    async with running.session.get(ui + "/workers", headers=operator) as r:
        page = await r.text()
        assert "worker app reloaded" in page and 'id="reload"' in page
