"""Login with API tokens, the read-only role, and every page's CSP and WCAG 2.1 A/AA scan."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import (
    ACCOUNTS,
    ADMIN_TOKEN,
    AXE,
    READ_TOKEN,
    Daemon,
    screenshot,
    start,
)
from tests.helpers import wait_sync


@pytest.fixture(scope="module")
def accounts_daemon(
    tmp_path_factory: pytest.TempPathFactory, store_section: str
) -> Iterator[Daemon]:
    d = start(tmp_path_factory.mktemp("acct"), store_section, ACCOUNTS, account="acme",
              token=ADMIN_TOKEN)  # fmt: skip
    try:
        yield d
    finally:
        d.proc.close()


def log_in(page: Any, d: Daemon, token: str) -> None:
    page.goto(d.ui + "/")
    expect(page).to_have_url(re.compile(r"/__ocd/ui/login\?next="))
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()


def test_login_takes_an_api_token_and_sets_a_strict_httponly_cookie(page, accounts_daemon):
    d = accounts_daemon
    page.goto(d.ui + "/login")
    screenshot(page, "login")
    page.get_by_label("API token").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    log_in(page, d, ADMIN_TOKEN)
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "ocd_ui_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/__ocd/"
    expect(page.locator("#queues")).to_contain_text("failing")  # the account's own queues
    page.get_by_role("button", name="Log out").click()
    page.goto(d.ui + "/queues/failing")
    expect(page).to_have_url(re.compile("/login"))


def test_a_read_only_token_sees_no_mutating_controls_and_a_forged_post_gets_403(
    page, accounts_daemon
):
    d = accounts_daemon
    d.send("failing-dlq", [{"n": 1}])
    log_in(page, d, READ_TOKEN)
    expect(page.locator("#read-only-banner")).to_be_visible()
    for path in ("/queues/failing", "/queues/failing-dlq", "/workers"):
        page.goto(d.ui + path)
        expect(page.locator("main")).to_be_visible()
        assert page.locator("main form[method=post]").count() == 0, path
        mutating = page.get_by_role(
            "button", name=re.compile("Pause|Purge|Redrive|Delete|Send|Reload")
        )
        assert mutating.count() == 0, path
    screenshot(page, "read-only")
    origin = d.base
    for path in ("/queues/failing/pause", "/queues/failing/purge", "/workers/reload"):
        r = page.request.post(d.ui + path, headers={"Origin": origin}, form={"confirm": "failing"})
        assert r.status == 403, path  # same-origin and logged in: refused for the role
    assert d.api("GET", "/queues/failing")["settings"]["delivery_paused"] is False
    assert d.backlog("failing-dlq") == 1


PAGES = ["/", "/queues/{q}", "/queues/{q}/messages/{seq}", "/consumers", "/workers",
         "/tasks/{task}", "/login"]  # fmt: skip


def test_every_page_has_a_strict_csp_no_inline_script_and_no_axe_violation(browser, daemon):
    name = "a11y"
    try:
        daemon.create(name)
    except Exception:
        pass  # made by an earlier run of this module's daemon
    daemon.send(name, [{"n": i, "html": "<b>bold</b>"} for i in range(3)])
    seq = daemon.api("POST", f"/queues/{name}/messages/browse", {"limit": 1})["messages"][0]["seq"]
    task = daemon.api("POST", f"/queues/{name}/messages/move", {"action": "delete", "seqs": [seq]})
    wait_sync(lambda: daemon.api("GET", f"/move_tasks/{task['id']}")["state"] == "completed")
    seq2 = daemon.api("POST", f"/queues/{name}/messages/browse", {"limit": 1})["messages"][0]["seq"]
    for scheme in ("light", "dark"):
        # bypass_csp lets the test inject axe; the page's own CSP is checked from headers.
        ctx = browser.new_context(bypass_csp=True, color_scheme=scheme)
        page = ctx.new_page()
        for template in PAGES:
            path = template.format(q=name, seq=seq2, task=task["id"])
            response = page.goto(daemon.ui + path)
            assert response is not None and response.status == 200, path
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert "'unsafe-inline'" not in csp
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["cache-control"] == "no-store"
            inline = page.evaluate(
                """() => [...document.querySelectorAll('script')].filter(s => !s.src).length
                  + [...document.querySelectorAll('*')].filter(e =>
                      [...e.attributes].some(a => a.name.startsWith('on'))).length"""
            )
            assert inline == 0, path
            page.add_script_tag(path=str(AXE))
            result = page.evaluate(
                "async () => await axe.run(document, "
                "{runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})"
            )
            violations = [(v["id"], [n["target"] for n in v["nodes"]][:3])
                          for v in result["violations"]]  # fmt: skip
            assert violations == [], (scheme, path, violations)
            assert len(result["passes"]) > 5  # axe really ran its rules
            slug = path.strip("/").replace("/", "-") or "home"
            screenshot(page, f"axe-{scheme}-{slug}")
        ctx.close()
