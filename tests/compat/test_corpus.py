"""Python Workers written the way Cloudflare's docs and examples write them (tests/compat/
workers/*: wrangler file + src/), all served by one real ``ocd serve`` and checked end to
end over HTTP; and the examples ocd cannot run, refused by ``ocd check-config`` with a
sentence naming what is unsupported."""

from __future__ import annotations

import json
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.conftest import OcdProcess, run_ocd
from tests.helpers import wait_sync

WORKERS = Path(__file__).resolve().parent / "workers"


def wrangler_file(folder: Path) -> Path:
    return next(p for p in sorted(folder.iterdir()) if p.name.startswith("wrangler."))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Iterator[tuple[OcdProcess, str]]:
    tmp = tmp_path_factory.mktemp("corpus")
    entries = "".join(
        f'\n[[workers]]\nwrangler = "{wrangler_file(d)}"\nroutes = ["/{d.name}"]\n'
        for d in sorted(WORKERS.iterdir())
        if d.is_dir()
    )
    cfg = tmp / "ocd.toml"
    cfg.write_text(f'[server]\nlisten = "127.0.0.1:0"\ndata_dir = "data"\n{entries}')
    p = OcdProcess(cfg)
    try:
        port = p.wait_started()
        yield p, f"http://127.0.0.1:{port}"
    finally:
        p.stop()
        p.close()


def request(url: str, method: str = "GET", data: bytes | None = None) -> tuple[int, str, dict]:
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def printed(p: OcdProcess, prefix: str, n: int = 1) -> list[str]:
    return wait_sync(lambda: [ln for ln in p.stdout if ln.startswith(prefix)][:n] or None, 20)


def test_the_docs_producer_with_to_js_and_the_consumer_with_to_py(corpus):
    p, base = corpus
    assert request(f"{base}/queues-docs/one")[:2] == (200, "Sent!")
    [line] = printed(p, "consumed docs-queue dict")
    body = json.loads(line.split(" ", 3)[3])
    assert (body["url"], body["method"]) == (f"{base}/queues-docs/one", "GET")
    assert body["headers"]["Host"] == base.removeprefix("http://")

    assert request(f"{base}/queues-docs/batch")[:2] == (200, "Sent batch!")
    lines = wait_sync(
        lambda: (
            (found := [ln for ln in p.stdout if "batch" in ln or "str" in ln])
            and len(found) >= 3
            and found
        ),
        20,
    )
    assert 'consumed docs-queue dict {"kind": "batch", "n": 1}' in lines
    assert 'consumed docs-queue dict {"kind": "batch", "n": 2}' in lines
    assert 'consumed docs-queue str "a text message"' in lines


def test_fetch_without_a_request_parameter_and_scheduled_by_hand(corpus):
    p, base = corpus
    assert request(f"{base}/cron")[:2] == (200, "Hello from Cron Worker")
    status, body, _ = request(f"{base}/__ocd/scheduled?cron=*/1+*+*+*+*", "POST")
    assert status == 200
    [run] = json.loads(body)["ran"]
    assert (run["worker"], run["cron"], run["outcome"]) == ("cron-worker", "*/1 * * * *", "ok")
    assert printed(p, "Scheduled task has been executed: */1 * * * *")


def test_a_failing_scheduled_run_answers_500_is_logged_and_counted(corpus):
    p, base = corpus
    status, body, _ = request(f"{base}/__ocd/scheduled?cron=0+9+*+*+MON-FRI", "POST")
    assert status == 500 and json.loads(body)["ran"][0]["outcome"] == "exception"
    wait_sync(lambda: p.event("cron_failed"), 10)
    assert "the weekday run failed" in p.log
    metrics = request(f"{base}/__ocd/metrics")[1]
    assert (
        'ocd_cron_runs_total{cron="0 9 * * MON-FRI",outcome="exception",worker="cron-worker"} 1.0'
        in metrics
    )
    assert request(f"{base}/__ocd/scheduled?cron=61+*+*+*+*", "POST")[0] == 400


def test_fetch_with_env_imports_a_sibling_module(corpus):
    _, base = corpus
    assert request(f"{base}/fetch-env", "DELETE")[:2] == (200, "HELLO! DELETE")


def test_fetch_with_env_and_ctx_runs_wait_until_work(corpus):
    p, base = corpus
    assert request(f"{base}/fetch-ctx")[:2] == (202, "accepted")
    printed(p, "waitUntil ran: ctx")
    printed(p, "waitUntil ran: workers.wait_until")


def test_module_level_fetch_and_queue_handlers(corpus):
    p, base = corpus
    assert request(f"{base}/module-style", "POST", b"hi there")[:2] == (200, "queued hi there")
    assert printed(p, "module consumed 'hi there' attempt 1")


def test_legacy_on_fetch_with_the_js_module(corpus):
    p, base = corpus
    status, body, headers = request(f"{base}/legacy-style", "PUT", b"")
    assert status == 200 and json.loads(body) == {"name": "legacy", "method": "PUT"}
    assert headers["content-type"] == "application/json"
    assert printed(p, "on_fetch called")


def test_pyfetch_js_fetch_and_workers_fetch_reach_a_local_server(corpus):
    _, base = corpus
    status, body, _ = request(f"{base}/outbound")
    assert status == 200
    assert json.loads(body) == {
        "status": 200,
        "ok": True,
        "texts": ["HELLO! POST", "HELLO! PUT", "HELLO! GET"],
    }


def test_wsgi_and_asgi_apps_through_workers_wsgi_and_import_asgi(corpus):
    _, base = corpus
    status, body, headers = request(f"{base}/wsgi-asgi/w?x=1")
    assert (status, body) == (200, "wsgi GET /wsgi-asgi/w x=1 from env")
    assert headers["X-App"] == "wsgi"
    status, body, headers = request(f"{base}/wsgi-asgi/asgi", "POST", b"payload")
    assert (status, body) == (201, "asgi POST /wsgi-asgi/asgi payload from env")
    assert headers["x-app"] == "asgi"


# ------------------------------------------------------------------ refused at check-config

SUFFIX = "are not supported by ocd (only queues, KV namespaces, D1 databases, R2 buckets, service bindings, vars and crons; Durable Objects in JavaScript workers); remove it or run this worker under wrangler dev"  # noqa: E501

REFUSED = [
    # (what, wrangler.jsonc body, key path, feature)
    ("durable-objects",
     '"durable_objects": {"bindings": [{"name": "LISTS", "class_name": "List"}]}',
     "durable_objects.bindings[0]", "Durable Object bindings in Python workers"),
    ("ai", '"ai": {"binding": "AI"}', "ai", "Workers AI bindings"),
    ("workflows", '"workflows": [{"name": "w", "binding": "MY_WORKFLOW", "class_name": "W"}]',
     "workflows[0]", "Workflow bindings"),
    ("worker-loaders", '"worker_loaders": [{"binding": "LOADER"}]', "worker_loaders[0]",
     "Worker Loader bindings"),
    ("vectorize", '"vectorize": [{"binding": "V", "index_name": "i"}]', "vectorize[0]",
     "Vectorize bindings"),
]  # fmt: skip

ENTRY = """\
from workers import DurableObject, Response, WorkerEntrypoint, WorkflowEntrypoint


class List(DurableObject):
    pass


class W(WorkflowEntrypoint):
    async def run(self, event, step):
        pass


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response(await self.env.FOO.get("bar"))
"""


def project(tmp_path: Path, bindings: str, entry: str = ENTRY, ignore: bool = False) -> Path:
    (tmp_path / "app" / "src").mkdir(parents=True)
    (tmp_path / "app" / "src" / "entry.py").write_text(entry)
    (tmp_path / "app" / "wrangler.jsonc").write_text(
        '{\n  "name": "example",\n  "main": "src/entry.py",\n'
        '  "compatibility_flags": ["python_workers"],\n'
        f"  {bindings},\n  // a comment\n}}\n"
    )
    cfg = tmp_path / "ocd.toml"
    extra = "ignore_unsupported_bindings = true\n" if ignore else ""
    cfg.write_text(
        '[server]\nlisten = "127.0.0.1:0"\ndata_dir = "data"\n\n'
        f'[[workers]]\nwrangler = "app/wrangler.jsonc"\nroutes = ["/"]\n{extra}'
    )
    return cfg


@pytest.mark.parametrize(("what", "bindings", "key_path", "feature"), REFUSED)
def test_an_unsupported_binding_is_refused_at_check_config(
    tmp_path, what, bindings, key_path, feature
):
    r = run_ocd("check-config", "-c", str(project(tmp_path, bindings)))
    assert r.returncode == 2, r.stdout + r.stderr
    expected = f"app/wrangler.jsonc: {key_path}: {feature} {SUFFIX}"
    assert expected in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_service_binding_to_a_worker_ocd_does_not_run_is_refused(tmp_path):
    bindings = '"services": [{"binding": "OTHER", "service": "other"}]'
    r = run_ocd("check-config", "-c", str(project(tmp_path, bindings)))
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        'app/wrangler.jsonc: services[0].service: no worker named "other" in this config (its '
        'workers: "example"); a service binding reaches another worker ocd runs'
    ) in r.stderr, r.stderr


def test_an_unsupported_js_api_is_refused_at_check_config(tmp_path):
    entry = textwrap.dedent(
        """\
        from js import HTMLRewriter
        from pyodide.ffi import create_proxy
        from workers import Request, WorkerEntrypoint, fetch


        class Default(WorkerEntrypoint):
            async def fetch(self, request: Request):
                return HTMLRewriter.new().transform(await fetch("https://example.com"))
        """
    )
    r = run_ocd("check-config", "-c", str(project(tmp_path, '"vars": {}', entry)))
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        "entry.py: js.HTMLRewriter is not supported by ocd; remove it or run this worker "
        "under wrangler dev" in r.stderr
    ), r.stderr


def test_ignore_unsupported_bindings_warns_and_the_binding_raises_when_used(tmp_path):
    cfg = project(tmp_path, '"hyperdrive": [{"binding": "FOO", "id": "abc"}]', ignore=True)
    r = run_ocd("check-config", "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    assert "hyperdrive[0]: Hyperdrive bindings are not supported by ocd" in r.stdout + r.stderr
    assert "env.FOO raises an error when used" in r.stdout + r.stderr

    p = OcdProcess(cfg)
    try:
        port = p.wait_started()
        status, body, _ = request(f"http://127.0.0.1:{port}/")
        assert status == 500 and "Traceback" not in body
        wait_sync(lambda: "Hyperdrive binding FOO is not supported by ocd" in p.log, 10)
        assert "NotImplementedError" in p.log
    finally:
        p.stop()
        p.close()


def test_r2_for_a_python_worker_is_refused_naming_why(tmp_path):
    cfg = project(tmp_path, '"r2_buckets": [{"binding": "B", "bucket_name": "bucket"}]')
    r = run_ocd("check-config", "-c", str(cfg))
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        "app/wrangler.jsonc: r2_buckets[0]: R2 buckets are bound for JavaScript/TypeScript "
        "workers only, not Python" in r.stderr
    ), r.stderr
