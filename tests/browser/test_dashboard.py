"""The dashboard's views and actions in Chromium, on a loopback daemon without accounts."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import expect

from tests.browser.conftest import Daemon, http_status, screenshot
from tests.browser.proxy import Proxy
from tests.helpers import wait_sync


def fresh(daemon: Daemon, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    daemon.create(name)
    return name


def test_playwright_drives_debians_chromium(page, daemon):
    page.goto(daemon.ui + "/")
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()
    screenshot(page, "queues")


def test_send_from_the_ui_shows_the_backlog_change_over_sse_in_a_second_page(context, daemon):
    name = fresh(daemon, "live")
    watcher = context.new_page()
    watcher.goto(daemon.ui + "/")
    cell = watcher.locator(f'[data-live="q.{name}.ready"]')
    expect(cell).to_have_text("0")
    sender = context.new_page()
    sender.goto(f"{daemon.ui}/queues/{name}")
    sender.get_by_text("Send a test message").click()
    sender.get_by_label("Body", exact=True).fill('{"from": "the dashboard"}')
    sender.get_by_role("button", name="Send", exact=True).click()
    expect(sender.get_by_role("alert")).to_have_text("Message sent.")
    expect(cell).to_have_text("1")  # no reload: the event stream carried it
    assert daemon.backlog(name) == 1


def test_message_browser_pages_by_cursor_and_expands_a_body(page, daemon):
    name = fresh(daemon, "browse")
    daemon.send(name, [{"n": i, "pad": "x" * 300} for i in range(30)])
    page.goto(f"{daemon.ui}/queues/{name}?limit=25")
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(25)
    expect(rows.first).to_contain_text('"n":0,')
    screenshot(page, "queue")
    page.locator("#next-page").click()
    expect(rows).to_have_count(5)
    expect(rows.first).to_contain_text('"n":25,')
    rows.first.locator("summary").click()
    payload = rows.first.locator("pre.payload")
    expect(payload).to_contain_text("x" * 300)  # the whole body, past the 200-char preview
    page.get_by_role("link", name="First page").click()
    expect(rows).to_have_count(25)
    newest = page.goto(f"{daemon.ui}/queues/{name}?order=newest&limit=50")
    assert newest is not None and newest.status == 200
    expect(rows.first).to_contain_text('"n":29,')


def test_a_hostile_body_renders_as_text(page, daemon):
    name = fresh(daemon, "hostile")
    hostile = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    daemon.send(name, [hostile], content_type="text")
    page.goto(f"{daemon.ui}/queues/{name}")
    expect(page.locator("#messages tbody tr").first).to_contain_text("<script>window.pwned=1")
    page.locator("#messages tbody tr a.mono").first.click()
    expect(page.locator("pre.payload")).to_contain_text('<img src=x onerror="window.pwned=2">')
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.locator("main img").count() == 0
    screenshot(page, "message")


def test_dead_letters_are_redriven_in_bulk_and_the_task_finishes(page, daemon):
    page.goto(daemon.ui + "/queues/failing")
    page.get_by_role("button", name="Pause delivery").click()  # so redriven ones stay put
    expect(page.get_by_role("alert")).to_have_text("Delivery paused.")
    page.get_by_role("button", name="Resume delivery").click()
    daemon.send("failing", [{"fail": True, "n": i} for i in range(12)])
    daemon.wait_backlog("failing-dlq", 12)
    page.get_by_role("button", name="Pause delivery").click()
    page.goto(daemon.ui + "/queues/failing-dlq")
    expect(page.locator(".badge.dlq")).to_contain_text("failing")
    page.get_by_label("All matching this filter").check()
    page.get_by_role("button", name="Redrive").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_visible()
    page.keyboard.press("Enter")  # the confirm button has focus: keyboard only
    expect(page.locator('[data-task-field="state"]')).to_have_text("completed")
    expect(page.locator('[data-task-field="done"]')).to_have_text("12")
    screenshot(page, "task")
    assert daemon.backlog("failing-dlq") == 0
    assert daemon.backlog("failing") == 12
    rows = daemon.api("POST", "/queues/failing/messages/browse", {"limit": 100})["messages"]
    assert {m["attempts"] for m in rows} == {0}  # attempts reset
    page.goto(daemon.ui + "/queues/failing")
    page.get_by_role("button", name="Resume delivery").click()
    daemon.wait_backlog("failing-dlq", 12)  # they fail again, once each


def test_selected_rows_are_deleted_by_a_task(page, daemon):
    name = fresh(daemon, "select")
    daemon.send(name, [{"n": i} for i in range(5)])
    page.goto(f"{daemon.ui}/queues/{name}")
    boxes = page.locator("input.row-select")
    boxes.nth(0).check()
    boxes.nth(2).check()
    page.get_by_role("button", name="Delete").click()
    page.locator("#confirm-ok").click()
    expect(page.locator('[data-task-field="state"]')).to_have_text("completed")
    assert daemon.backlog(name) == 3


def test_pause_and_resume_delivery(page, daemon):
    name = fresh(daemon, "pause")
    page.goto(f"{daemon.ui}/queues/{name}")
    page.get_by_role("button", name="Pause delivery").click()
    expect(page.locator("h1 .badge.paused")).to_have_text("paused")
    assert daemon.api("GET", f"/queues/{name}")["settings"]["delivery_paused"] is True
    page.get_by_role("button", name="Resume delivery").click()
    expect(page.get_by_role("alert")).to_have_text("Delivery resumed.")
    assert daemon.api("GET", f"/queues/{name}")["settings"]["delivery_paused"] is False


def test_purge_needs_the_queue_name_typed(page, daemon):
    name = fresh(daemon, "purge")
    daemon.send(name, [1, 2, 3])
    page.goto(f"{daemon.ui}/queues/{name}")
    page.get_by_role("button", name="Purge…").click()
    submit = page.locator("#purge-submit")
    expect(submit).to_be_disabled()
    page.get_by_label(re.compile("Type the queue's name")).fill(name + "x")
    expect(submit).to_be_disabled()
    assert daemon.backlog(name) == 3
    page.get_by_label(re.compile("Type the queue's name")).fill(name)
    expect(submit).to_be_enabled()
    submit.click()
    expect(page.get_by_role("alert")).to_have_text("Queue purged.")
    assert daemon.backlog(name) == 0


def test_search_says_how_many_messages_it_scanned(page, daemon):
    name = fresh(daemon, "search")
    daemon.send(name, [{"user": f"u{i}"} for i in range(40)])
    page.goto(f"{daemon.ui}/queues/{name}")
    page.get_by_label("Body contains").fill('"u17"')
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#messages tbody tr")).to_have_count(1)
    expect(page.locator("#search-note")).to_contain_text("newest 40 message(s)")


def test_a_cross_site_post_is_refused(page, daemon):
    name = fresh(daemon, "csrf")
    url = f"{daemon.ui}/queues/{name}/pause"
    assert http_status(url, b"", {"Sec-Fetch-Site": "cross-site"}) == 403
    assert http_status(url, b"", {"Origin": "http://evil.example"}) == 403
    assert http_status(url, b"", {}) == 403  # neither header: refused too
    # A real page of another origin (another port) posting a form to the dashboard:
    with Proxy(daemon.base) as other:
        page.goto(f"http://localhost:{other.port}/elsewhere")  # any page of that origin
        page.set_content(f'<form method="post" action="{url}"><button>go</button></form>')
        page.get_by_role("button", name="go").click()
        expect(page.locator("body")).to_contain_text("Cross-site request refused")
    assert daemon.api("GET", f"/queues/{name}")["settings"]["delivery_paused"] is False


def test_consumers_and_workers_pages(page, daemon):
    page.goto(daemon.ui + "/consumers")
    expect(page.locator("#consumers")).to_contain_text("failing")
    screenshot(page, "consumers")
    page.goto(daemon.ui + "/workers")
    expect(page.locator("#workers")).to_contain_text("recorder.py")
    page.get_by_role("button", name=re.compile("Reload")).click()
    expect(page.get_by_role("alert")).to_have_text("Reload applied.")
    expect(page.locator("main")).to_contain_text("Last reload")
    screenshot(page, "workers")
    page.goto(daemon.ui + "/?sort=ready")  # by now the module's queues have some traffic
    expect(page.locator("#queues")).to_contain_text("failing-dlq")
    screenshot(page, "queues-overview")


def test_the_prefix_mount_behind_a_rewriting_proxy_loads_every_asset(
    browser, tmp_path, store_section
):
    from tests.browser.conftest import start

    d = start(tmp_path, store_section, '[ui]\nbase_path = "/ops/__ocd/ui"\n')
    try:
        with Proxy(d.base) as proxy:
            ctx = browser.new_context()
            page = ctx.new_page()
            responses = []
            page.on("response", lambda r: responses.append((r.url, r.status)))
            public = f"http://127.0.0.1:{proxy.port}/ops/__ocd/ui"
            page.goto(public + "/")
            page.get_by_role("link", name="failing", exact=True).click()
            expect(page.get_by_role("heading", name=re.compile("Queue failing"))).to_be_visible()
            d.send("failing", [{"n": 1}])
            wait_sync(lambda: any("/events" in p for p in proxy.seen), 10)
            page.get_by_role("link", name="Workers").click()
            expect(page.locator("#workers")).to_be_visible()
            assert responses and all(u.startswith(public) for u, _ in responses), responses
            assert all(s < 400 for _, s in responses), responses
            css = page.evaluate("getComputedStyle(document.querySelector('.top')).display")
            assert css == "flex"  # the stylesheet came through the proxy
            ctx.close()
    finally:
        d.proc.close()
