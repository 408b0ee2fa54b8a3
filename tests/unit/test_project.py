"""Which file is the project (ocd.toml or a wrangler file), what a wrangler project becomes,
``--port``, and the worker without routes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocd.catchall import catch_all, routes_of
from ocd.config import find_project, load_config
from ocd.errors import ConfigError

WRANGLER = '{ "name": "app", "main": "src/index.ts", "compatibility_date": "2026-04-01" }\n'


def _project(tmp: Path, name: str = "wrangler.jsonc", text: str = WRANGLER) -> Path:
    (tmp / "src").mkdir(exist_ok=True)
    (tmp / "src" / "index.ts").write_text("export default {};\n")
    (tmp / name).write_text(text)
    return tmp / name


def test_ocd_toml_comes_first_then_the_wrangler_files_in_wranglers_order(tmp_path):
    assert find_project(tmp_path) is None
    _project(tmp_path, "wrangler.toml", 'name = "app"\nmain = "src/index.ts"\n')
    assert find_project(tmp_path) == tmp_path / "wrangler.toml"
    _project(tmp_path, "wrangler.jsonc")
    assert find_project(tmp_path) == tmp_path / "wrangler.jsonc"
    (tmp_path / "ocd.toml").write_text("")
    assert find_project(tmp_path) == tmp_path / "ocd.toml"


def test_a_wrangler_file_is_a_whole_project_as_wrangler_dev_runs_it(tmp_path):
    config = load_config(_project(tmp_path), environ={})
    assert config.server.listen == "127.0.0.1:8787"
    assert config.server.data_dir == tmp_path / ".ocd"
    [worker] = config.workers
    assert (worker.name, worker.routes, worker.compatibility_date) == ("app", (), "2026-04-01")
    assert catch_all(config, {"app"}) == "app"
    assert routes_of(worker.routes, "app", "app") == ("/",)


def test_port_replaces_the_listen_port_of_either_kind_of_file(tmp_path):
    assert load_config(_project(tmp_path), environ={}, port=9999).server.port == 9999
    toml = tmp_path / "ocd.toml"
    toml.write_text('[server]\nlisten = "127.0.0.1:1234"\n')
    config = load_config(toml, environ={}, port=0)
    assert (config.server.port, config.port_override) == (0, 0)


def test_a_wrangler_project_without_a_name_says_so_in_its_own_file(tmp_path):
    path = _project(tmp_path, text='{ "main": "src/index.ts" }\n')
    with pytest.raises(ConfigError) as e:
        load_config(path, environ={})
    assert [str(p) for p in e.value.problems] == [f'{path}: missing required key "name"']


def test_a_js_worker_without_a_date_is_kept_with_a_warning(tmp_path):
    path = _project(tmp_path, text='{ "name": "app", "main": "src/index.ts" }\n')
    config = load_config(path, environ={})
    assert config.workers[0].compatibility_date is None  # the workerd in use decides
    assert len(config.warnings) == 1
    assert config.warnings[0].startswith(f"{path}: compatibility_date: not set")


def test_several_workers_with_fetch_and_no_routes_are_each_named(tmp_path):
    _project(tmp_path)
    toml = tmp_path / "ocd.toml"
    toml.write_text(
        "".join(
            f'[[workers]]\nname = "{n}"\nmain = "src/index.ts"\ncompatibility_date = "2026-04-01"\n'
            for n in ("a", "b", "c")
        )
    )
    config = load_config(toml, environ={})
    assert catch_all(config, {"a"}) == "a"  # b and c have no fetch: they take nothing
    with pytest.raises(ConfigError) as e:
        catch_all(config, {"a", "c"})
    shown = [str(p) for p in e.value.problems]
    assert [s.split(": ")[1] for s in shown] == ["workers[0]", "workers[2]"]
    assert 'worker "a" has a fetch handler and no routes, and so has "c"' in shown[0]
    assert 'add routes = ["/..."]' in shown[0]


def test_each_project_file_name_has_its_loader(tmp_path):
    from ocd.config import load_cf_config
    from ocd.config.loader import load_ocd_toml, load_wrangler_project
    from ocd.config.project import loader_for

    assert loader_for(Path("cf.config.ts")) is load_cf_config
    assert loader_for(Path("a/wrangler.toml")) is load_wrangler_project
    assert loader_for(Path("staging.jsonc")) is load_wrangler_project
    assert loader_for(Path("/etc/ocd/ocd.toml")) is load_ocd_toml
    assert loader_for(Path("other.toml")) is load_ocd_toml
