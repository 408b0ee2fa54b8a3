"""Durable Object bindings and migrations, as wrangler files and ocd.toml write them: what a
JS worker gets, and every refusal with its file and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocd.config import DurableClassConfig, DurableObjectConfig, load_config
from ocd.errors import ConfigError

ENTRY = '[[workers]]\nwrangler = "app/wrangler.toml"\nroutes = ["/"]\n'
WRANGLER = 'name = "w"\nmain = "worker.js"\ncompatibility_date = "2026-11-01"\n'
MIGRATIONS = """
[[migrations]]
tag = "v1"
new_classes = ["Old"]
[[migrations]]
tag = "v2"
new_sqlite_classes = ["Counter"]
renamed_classes = [{ from = "Old", to = "Renamed" }]
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "worker.js").write_text("export default {};\n")
    (tmp_path / "app" / "worker.py").write_text("")
    return tmp_path


def _load(root: Path, wrangler: str, top: str = "", entry: str = ENTRY):  # type: ignore[no-untyped-def]
    (root / "app" / "wrangler.toml").write_text(WRANGLER + wrangler)
    (root / "ocd.toml").write_text(top + entry)
    return load_config(root / "ocd.toml", {})


def _problems(
    root: Path, wrangler: str, top: str = "", entry: str = ENTRY
) -> list[tuple[str, ...]]:
    with pytest.raises(ConfigError) as info:
        _load(root, wrangler, top, entry)
    return [(str(p.file.relative_to(root)), p.key_path, p.message) for p in info.value.problems]


def test_bindings_and_migrations_give_the_classes_with_their_storage_keys(root: Path) -> None:
    bindings = (
        '[[durable_objects.bindings]]\nname = "COUNTER"\nclass_name = "Counter"\n'
        '[[durable_objects.bindings]]\nname = "R"\nclass_name = "Renamed"\nscript_name = "w"\n'
    )
    [w] = _load(root, bindings + MIGRATIONS).workers
    assert w.durable_objects == (
        DurableObjectConfig("COUNTER", "Counter"),
        DurableObjectConfig("R", "Renamed"),  # its own name as script_name: this worker
    )
    # a rename keeps the storage (and the ids) of the class's first name
    assert w.durable_classes == (
        DurableClassConfig("Counter", "Counter", sql=True),
        DurableClassConfig("Renamed", "Old", sql=False),
    )


def test_a_class_of_another_js_worker_is_bound_with_script_name(root: Path) -> None:
    (root / "other").mkdir()
    (root / "other" / "worker.js").write_text("export default {};\n")
    (root / "other" / "wrangler.toml").write_text(
        'name = "other"\nmain = "worker.js"\ncompatibility_date = "2026-11-01"\n' + MIGRATIONS
    )
    two = ENTRY + '[[workers]]\nwrangler = "other/wrangler.toml"\n'
    bound = (
        '[[durable_objects.bindings]]\nname = "C"\nclass_name = "Counter"\nscript_name = "other"\n'
    )
    w, _ = _load(root, bound, entry=two).workers
    assert w.durable_objects == (DurableObjectConfig("C", "Counter", "other"),)
    assert w.durable_classes == ()


def test_problems_name_file_and_key_path(root: Path) -> None:
    got = _problems(
        root,
        '[vars]\nX = "1"\n'
        '[[durable_objects.bindings]]\nname = "X"\nclass_name = "Counter"\n'
        '[[durable_objects.bindings]]\nname = "A"\nclass_name = "Missing"\n'
        '[[durable_objects.bindings]]\nname = "B"\nclass_name = "Counter"\nscript_name = "nope"\n'
        '[[durable_objects.bindings]]\nname = "C"\n'
        '[[migrations]]\ntag = "v1"\nnew_sqlite_classes = ["Counter"]\n'
        '[[migrations]]\ntag = "v2"\ndeleted_classes = ["Counter"]\n',
    )
    assert got == [
        ("app/wrangler.toml", "durable_objects.bindings[0].name", 'binding "X" is already used'),
        ("app/wrangler.toml", "durable_objects.bindings[3]", 'missing required key "class_name"'),
        ("app/wrangler.toml", "migrations[1].deleted_classes",
         "deleted_classes are not supported by ocd yet: the classes' objects would stay on disk; "
         "keep the class, or run this worker under wrangler dev"),
        ("app/wrangler.toml", "durable_objects.bindings[1].class_name",
         'class "Missing" is not defined by a migration of this worker: add a migration, e.g. '
         '[[migrations]] tag = "v1" new_sqlite_classes = ["Missing"]'),
        ("app/wrangler.toml", "durable_objects.bindings[2].script_name",
         '"nope" is not a worker of this config'),
    ]  # fmt: skip


def test_refused_on_the_postgresql_backend(root: Path) -> None:
    bound = '[[durable_objects.bindings]]\nname = "C"\nclass_name = "Counter"\n' + MIGRATIONS
    top = "[store]\nbackend = 'postgres'\ndsn = 'postgresql://db/ocd'\n"
    assert _problems(root, bound, top) == [
        ("app/wrangler.toml", "durable_objects",
         'Durable Objects are a node\'s own: not available with [store] backend = "postgres"'),
    ]  # fmt: skip


def test_refused_for_a_python_worker(root: Path) -> None:
    entry = (
        '[[workers]]\nname = "py"\nmain = "app/worker.py"\n'
        'durable_objects = { bindings = [{ name = "C", class_name = "Counter" }] }\n'
    )
    with pytest.raises(ConfigError) as info:
        (root / "ocd.toml").write_text(entry)
        load_config(root / "ocd.toml", {})
    assert [(p.key_path, p.message) for p in info.value.problems] == [
        ("workers[0].durable_objects",
         "Durable Objects run in JavaScript and TypeScript workers only (workerd runs them)"),
    ]  # fmt: skip
