"""``cf.config.ts`` project files read into ocd's worker config: the real esbuild bundles
them with ``cf/config`` resolved to ocd's module, the real node evaluates them, and the
result is checked as a wrangler file is, every problem at the key path the user wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocd.config import load_cf_config, load_config
from ocd.errors import ConfigError
from tests.js import ESBUILD, NODE

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("workerd_tools")]
ENV = {"OCD_ESBUILD": str(ESBUILD), "OCD_NODE": str(NODE)}
INDEX = "export default { async fetch() { return new Response('ok'); } };\n"


def _project(tmp: Path, body: str, name: str = "cf.config.ts") -> Path:
    (tmp / "src").mkdir(exist_ok=True)
    (tmp / "src" / "index.ts").write_text(INDEX)
    path = tmp / name
    path.write_text('import { bindings, defineConfig } from "cf/config";\n' + body)
    return path


def _problems(path: Path, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_config(path, {**ENV, **(environ or {})})
    return [str(p) for p in e.value.problems]


SEED = """
export default defineConfig({
  worker: {
    name: "queue-app",
    entrypoint: "src/index.ts",
    env: { QUEUE: bindings.queue({ name: "jobs" }) },
    triggers: { queues: [{ queue: "jobs" }] },
  },
});
"""


def test_the_seed_config_becomes_a_workerd_worker_with_its_producer_and_consumer(tmp_path):
    path = _project(tmp_path, SEED)
    config = load_cf_config(path, ENV)
    (w,) = config.workers
    assert (w.name, w.main, w.js, w.routes) == (
        "queue-app",
        tmp_path / "src/index.ts",
        True,
        ("/",),
    )
    assert [(p.binding, p.queue) for p in w.producers] == [("QUEUE", "jobs")]
    (c,) = w.consumers
    assert (c.queue, c.max_batch_size, c.max_retries) == ("jobs", 10, 3)  # wrangler's defaults
    assert w.compatibility_date == "2026-11-01"
    assert [q.name for q in config.queues] == ["jobs"]
    assert config.path == path and w.source == path
    assert config.server.data_dir == tmp_path / ".ocd"


def test_every_consumer_key_vars_secrets_crons_and_dates_are_read(tmp_path):
    (tmp_path / "token").write_text("s3cret-from-file\n")
    (tmp_path / "token").chmod(0o600)
    path = _project(
        tmp_path,
        """
const retries: number = 7;
export default defineConfig({
  worker: {
    name: "full",
    entrypoint: "src/index.ts",
    compatibilityDate: "2026-10-01",
    compatibilityFlags: ["nodejs_compat"],
    env: {
      OUT: bindings.queue({ name: "out" }),
      MODE: bindings.var("fast"),
      LIMITS: { max: 3 },
      API_KEY: bindings.secret("API_KEY_FROM_ENV"),
      TOKEN: bindings.secret({ file: "token" }),
    },
    triggers: {
      queues: [{
        queue: "in", maxBatchSize: 50, maxBatchTimeout: 2, maxRetries: retries,
        retryDelay: 30, deadLetterQueue: "in-dlq", maxConcurrency: 4,
      }],
      crons: ["*/5 * * * *"],
    },
  },
});
""",
    )
    (w,) = load_cf_config(path, {**ENV, "API_KEY_FROM_ENV": "s3cret-from-env"}).workers
    assert dict(w.vars) == {
        "MODE": "fast",
        "LIMITS": {"max": 3},
        "API_KEY": "s3cret-from-env",
        "TOKEN": "s3cret-from-file",
    }
    (c,) = w.consumers
    assert (c.queue, c.max_batch_size, c.max_batch_timeout_s, c.max_retries) == ("in", 50, 2, 7)
    assert (c.retry_delay_s, c.dead_letter_queue, c.max_concurrency) == (30, "in-dlq", 4)
    assert w.crons == ("*/5 * * * *",)
    assert (w.compatibility_date, w.compatibility_flags) == ("2026-10-01", ("nodejs_compat",))
    assert "s3cret" not in path.read_text()


def test_a_plain_js_config_without_define_config_works_too(tmp_path):
    path = tmp_path / "cf.config.mjs"
    (tmp_path / "w.js").write_text(INDEX)
    path.write_text('export default { worker: { name: "plain", entrypoint: "w.js" } };\n')
    (w,) = load_config(path, ENV).workers
    assert (w.name, w.main) == ("plain", tmp_path / "w.js")


def test_an_ocd_toml_worker_entry_names_a_cf_config(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    _project(app, SEED)
    cfg = tmp_path / "ocd.toml"
    cfg.write_text('[[workers]]\ncf_config = "app/cf.config.ts"\nroutes = ["/jobs"]\n')
    config = load_config(cfg, ENV)
    (w,) = config.workers
    assert (w.name, w.routes, w.main) == ("queue-app", ("/jobs",), app / "src/index.ts")
    assert [c.queue for c in w.consumers] == ["jobs"]


def test_problems_name_the_cf_config_key_path(tmp_path):
    path = _project(
        tmp_path,
        """
export default defineConfig({
  worker: {
    name: "bad app",
    entrypoint: "src/index.ts",
    colour: "blue",
    env: { QUEUE: bindings.queue({ name: "Jobs!" }), CACHE: bindings.kv({ id: "x" }) },
    triggers: {
      queues: [{ queue: "jobs" }, { queue: "jobs2", maxBatchSize: 500, maxRetrys: 1 }],
      crons: ["not a cron"],
    },
  },
});
""",
    )
    problems = _problems(path)
    assert (
        f"{path}: worker.triggers.queues[1].maxBatchSize: expected an integer 1..100, got 500"
        in (problems)
    )
    assert f'{path}: worker.triggers.queues[1].maxRetrys: unknown key "maxRetrys"' in problems
    assert f'{path}: worker.colour: unknown key "colour"' in problems
    assert any(p.startswith(f"{path}: worker.name: expected a worker name") for p in problems)
    assert any(
        p.startswith(f"{path}: worker.env.QUEUE.name: expected a queue name") for p in problems
    )
    assert any(
        p.startswith(f"{path}: worker.env.CACHE: bindings.kv(...) is not supported")
        for p in problems
    )
    assert any(p.startswith(f"{path}: worker.triggers.crons[0]: expected a cron") for p in problems)
    assert len(problems) == 7, problems


def test_secrets_never_in_the_file_and_refused_when_missing_or_readable_by_others(tmp_path):
    (tmp_path / "token").write_text("x\n")
    (tmp_path / "token").chmod(0o644)
    path = _project(
        tmp_path,
        """
export default defineConfig({ worker: { name: "s", entrypoint: "src/index.ts", env: {
  A: bindings.secret("UNSET_SECRET_VAR"), B: bindings.secret({ file: "token" }),
} } });
""",
    )
    problems = _problems(path)
    assert f'{path}: worker.env.A: environment variable "UNSET_SECRET_VAR" is not set' in problems
    assert any(
        p.startswith(f"{path}: worker.env.B.file: {tmp_path / 'token'} is open to group or others")
        for p in problems
    )


def test_a_throw_while_evaluating_names_the_file_and_shows_the_js_error(tmp_path):
    path = _project(
        tmp_path,
        'function region(): string {\n  throw new RangeError("no region configured");\n}\n'
        "export default defineConfig({\n"
        '  worker: { name: region(), entrypoint: "src/index.ts" } });\n',
    )
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}: evaluating the file failed:")
    assert "RangeError: no region configured" in problem
    assert f"{path}:3:9" in problem  # the throw, in the TypeScript source (source-mapped)


def test_a_syntax_error_names_the_file_line_and_column(tmp_path):
    path = _project(tmp_path, "export default defineConfig({ worker: { name: 'x', }\n")
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}: evaluating the file failed:")
    assert "cf.config.ts:3:0: Expected" in problem


def test_a_missing_node_is_a_config_problem_saying_what_to_install(tmp_path):
    path = _project(tmp_path, SEED)
    (problem,) = _problems(path, {"OCD_NODE": str(tmp_path / "no-node"), "PATH": ""})
    assert "OCD_NODE" in problem and "no executable" in problem
