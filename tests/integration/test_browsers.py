"""A web page in the user's browser cannot drive a default (token-less) ocd: the REST API and
the SQS endpoint refuse foreign Host names (DNS rebinding), cross-site requests and REST
bodies without a JSON content type, each in the surface's own error shape; the clients
ocd supports (no browser headers, JSON or form bodies) go on working."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import aiohttp
import pytest

from tests.integration.sqs import SqsDaemon, start

API = "/client/v4/accounts/local/queues"
CROSS_SITE = {"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}


@pytest.fixture
async def sqs(tmp_path, store_section):
    session = aiohttp.ClientSession()
    d = await start(tmp_path, store_section, session)
    yield d
    await d.daemon.shutdown(timeout_s=1)
    await session.close()


async def _queue_names(s: aiohttp.ClientSession, base: str) -> list[str]:
    async with s.get(base + API) as r:
        assert r.status == 200
        return [q["queue_name"] for q in (await r.json())["result"]]


async def _backlog(s: aiohttp.ClientSession, base: str, queue: str) -> int:
    async with s.get(f"{base}{API}/{queue}/metrics") as r:
        assert r.status == 200, await r.text()
        return int((await r.json())["result"]["backlog_count"])


async def test_a_cross_site_text_plain_purge_is_refused_in_the_envelope(start_daemon):
    running = await start_daemon()
    s, base = running.session, running.base
    await running.send({"keep": 1})
    async with s.post(
        base + API + "/jobs/purge",
        data='{"delete_messages_permanently":true}',
        headers={**CROSS_SITE, "Content-Type": "text/plain"},
    ) as r:
        assert r.status == 403
        body = await r.json()
        assert body["success"] is False and "cross-site" in body["errors"][0]["message"]
    # a browser that sends no Sec-Fetch-Site still sends its Origin
    async with s.post(
        base + API + "/jobs/purge",
        data='{"delete_messages_permanently":true}',
        headers={"Origin": "http://evil.example", "Content-Type": "text/plain"},
    ) as r:
        assert r.status == 403
    assert await _backlog(s, base, "jobs") == 1


async def test_a_browsers_text_plain_body_is_not_parsed_as_json(start_daemon):
    running = await start_daemon()
    s, base = running.session, running.base
    await running.send({"keep": 1})
    purge = '{"delete_messages_permanently":true}'
    async with s.post(
        base + API + "/jobs/purge",
        data=purge,
        headers={"Content-Type": "text/plain", "Sec-Fetch-Site": "same-origin"},
    ) as r:
        assert r.status == 415
        body = await r.json()
        assert body["success"] is False and "application/json" in body["errors"][0]["message"]
    assert await _backlog(s, base, "jobs") == 1
    # wrangler (node's fetch) sends its JSON as text/plain, with Sec-Fetch-Mode but no
    # Origin or Sec-Fetch-Site: read as JSON
    wrangler = {"Content-Type": "text/plain;charset=UTF-8", "Sec-Fetch-Mode": "cors"}
    async with s.post(base + API + "/jobs/purge", data=purge, headers=wrangler) as r:
        assert r.status == 200, await r.text()
    assert await _backlog(s, base, "jobs") == 0
    await running.send({"keep": 2})
    async with s.post(
        base + API + "/jobs/purge",
        data=purge,
        headers={"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"},
    ) as r:
        assert r.status == 200, await r.text()
    assert await _backlog(s, base, "jobs") == 0


async def test_a_foreign_host_is_refused_and_local_names_are_not(start_daemon):
    running = await start_daemon()
    s, base = running.session, running.base
    port = running.daemon.port
    async with s.get(base + API, headers={"Host": f"evil.example:{port}"}) as r:
        assert r.status == 403
        body = await r.json()
        assert body["success"] is False and "evil.example" in body["errors"][0]["message"]
    for host in ("localhost", f"localhost:{port}", f"app.localhost:{port}", "127.0.0.1",
                 f"127.0.0.5:{port}", f"[::1]:{port}"):  # fmt: skip
        async with s.get(base + API, headers={"Host": host}) as r:
            assert r.status == 200, (host, await r.text())
    # the address bar (Sec-Fetch-Site: none) and the page's own origin are the user's
    for headers in ({"Sec-Fetch-Site": "none"}, {"Origin": base}):
        async with s.get(base + API, headers=headers) as r:
            assert r.status == 200, headers
    assert "jobs" in await _queue_names(s, base)


async def test_worker_routes_are_left_to_the_worker(start_daemon):
    running = await start_daemon()
    async with running.session.post(
        running.base + "/send",
        json={"body": {"from": "a page"}},
        headers={**CROSS_SITE, "Host": "evil.example"},
    ) as r:
        assert r.status == 200, await r.text()


async def test_a_cross_site_query_get_cannot_delete_a_queue(sqs: SqsDaemon) -> None:
    url = f"{sqs.endpoint}/000000000000/jobs"
    get = f"{sqs.endpoint}/?Action=DeleteQueue&QueueUrl={url}"
    async with sqs.session.get(get, headers={"Sec-Fetch-Site": "cross-site"}) as r:
        assert r.status == 403
        assert r.content_type == "text/xml"
        err = ET.fromstring(await r.text())
        code = err.find(".//{*}Code")
        assert code is not None and code.text == "AccessDenied"
    urls = (await sqs.call(sqs.sqs.list_queues)).get("QueueUrls", [])
    assert any(u.endswith("/jobs") for u in urls)


async def test_a_cross_site_form_post_and_a_foreign_host_are_refused(sqs: SqsDaemon) -> None:
    form = {"Action": "PurgeQueue", "QueueUrl": f"{sqs.endpoint}/000000000000/jobs"}
    async with sqs.session.post(
        sqs.endpoint + "/", data=form, headers={"Origin": "http://evil.example"}
    ) as r:
        assert r.status == 403 and r.content_type == "text/xml"
    async with sqs.session.post(
        sqs.endpoint + "/",
        json={"QueueNamePrefix": ""},
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS.ListQueues",
            "Host": f"evil.example:{sqs.daemon.sqs_port}",
        },
    ) as r:
        assert r.status == 403
        body = await r.json(content_type=None)
        assert body["__type"].endswith("#AccessDeniedException")
        assert r.headers["x-amzn-query-error"] == "AccessDenied;Sender"
    # a client's own request, no browser headers, goes through
    async with sqs.session.post(sqs.endpoint + "/", data={"Action": "ListQueues"}) as r:
        assert r.status == 200 and "/jobs" in await r.text()


async def test_web_pages_cannot_read_status_or_metrics_or_trigger_crons(start_daemon):
    running = await start_daemon()
    s, base = running.session, running.base
    for method, path in (
        ("GET", "/__ocd/status"),
        ("GET", "/__ocd/metrics"),
        ("POST", "/__ocd/scheduled"),
    ):
        async with s.request(method, base + path, headers=CROSS_SITE) as r:
            assert r.status == 403, (path, r.status)
        async with s.request(method, base + path, headers={"Host": "evil.example:8787"}) as r:
            assert r.status == 403, (path, r.status)
    async with s.get(base + "/__ocd/status") as r:  # ocd status, curl: as before
        assert r.status == 200
