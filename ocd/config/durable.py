"""Durable Object bindings and migrations of a worker, as wrangler writes them.

``durable_objects.bindings`` name a class and, for a class of another ocd worker,
``script_name``; ``migrations`` say which classes a worker defines and whether they are
SQLite-backed. workerd runs the objects on local SQLite files under the data directory,
so they are a node's own: with the PostgreSQL backend they are refused, as they are for
Python workers (workerd runs only the JavaScript ones). Cross-worker checks (a class bound
here is defined where it says) run once every worker is read: ``check_classes``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ocd.config.file import File, Table
from ocd.config.model import DurableClassConfig, DurableObjectConfig, WorkerConfig

BINDING_KEYS = ("name", "class_name", "script_name")
MIGRATION_KEYS = (
    "tag", "new_classes", "new_sqlite_classes", "renamed_classes", "deleted_classes",
    "transferred_classes",
)  # fmt: skip
_RENAME_KEYS = ("from", "to")
_CLASS = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_CLASS_WHAT = "a JavaScript class name"
POSTGRES = 'Durable Objects are a node\'s own: not available with [store] backend = "postgres"'
PYTHON = "Durable Objects run in JavaScript and TypeScript workers only (workerd runs them)"
NOT_YET = (
    "{key} are not supported by ocd yet: the classes' objects would stay on disk; "
    "keep the class, or run this worker under wrangler dev"
)


@dataclass(frozen=True, slots=True)
class BindingSite:
    """Where a binding was written, for the checks that need every worker."""

    file: File
    key_path: str
    worker: str
    binding: DurableObjectConfig


def bindings(
    src: Table, taken: set[str], sites: list[BindingSite], worker: str
) -> tuple[DurableObjectConfig, ...]:
    """``durable_objects.bindings`` of ``src``; a name in ``taken`` (vars, producers, KV)
    is a problem."""
    if "durable_objects" not in src:
        return ()
    t = src.table("durable_objects", ("bindings",))
    if t is None:
        return ()
    out: list[DurableObjectConfig] = []
    for kp, item in t.items("bindings"):
        b = src.file.table(item, kp, BINDING_KEYS, required=("name", "class_name"))
        if b is None:
            continue
        name = b.text("name", re.compile(r"[A-Za-z_][A-Za-z0-9_]*").fullmatch, "a binding name")
        class_name = b.text("class_name", _CLASS.fullmatch, _CLASS_WHAT)
        script = b.text("script_name", bool, "the name of another worker of this config")
        if not name or not class_name:
            continue
        if name in taken or any(o.binding == name for o in out):
            src.file.problem(f"{kp}.name", f'binding "{name}" is already used')
            continue
        binding = DurableObjectConfig(name, class_name, script if script != worker else None)
        sites.append(BindingSite(src.file, kp, worker, binding))
        out.append(binding)
    return tuple(out)


def classes(src: Table) -> tuple[DurableClassConfig, ...]:
    """The classes ``migrations`` leave defined, in order: each with the storage key of its
    first name (renamed_classes keep it) and whether it is SQLite-backed."""
    defined: dict[str, DurableClassConfig] = {}
    tags: set[str] = set()
    for kp, item in src.items("migrations"):
        m = src.file.table(item, kp, MIGRATION_KEYS, required=("tag",))
        if m is None:
            continue
        tag = m.text("tag", bool, "a migration tag")
        if tag in tags:
            m.problem("tag", f'migration tag "{tag}" is used twice')
        tags.add(tag or "")
        for key in ("deleted_classes", "transferred_classes"):
            if m.get(key):
                m.problem(key, NOT_YET.format(key=key))
        for key, sql in (("new_classes", False), ("new_sqlite_classes", True)):
            for ckp, name in m.items(key):
                if not isinstance(name, str) or not _CLASS.fullmatch(name):
                    src.file.expected(ckp, _CLASS_WHAT, name)
                elif name in defined:
                    src.file.problem(ckp, f'class "{name}" is already defined by a migration')
                else:
                    defined[name] = DurableClassConfig(name, name, sql)
        for rkp, item in m.items("renamed_classes"):
            r = src.file.table(item, rkp, _RENAME_KEYS, required=_RENAME_KEYS)
            if r is None:
                continue
            old = r.text("from", _CLASS.fullmatch, _CLASS_WHAT)
            new = r.text("to", _CLASS.fullmatch, _CLASS_WHAT)
            if not old or not new:
                continue
            if old not in defined:
                r.problem("from", f'class "{old}" is not defined by an earlier migration')
            elif new in defined:
                r.problem("to", f'class "{new}" is already defined')
            else:
                was = defined.pop(old)
                defined[new] = DurableClassConfig(new, was.storage_key, was.sql)
    return tuple(defined.values())


def refuse(src: Table, why: str) -> None:
    """Durable Objects where they cannot run: the problem at ``durable_objects``."""
    if src.get("durable_objects"):
        src.problem("durable_objects", why)


def check_classes(workers: Sequence[WorkerConfig], sites: Sequence[BindingSite]) -> None:
    """Each binding's class is one its worker (``script_name``'s, else its own) defines."""
    by_name = {w.name: w for w in workers}
    for s in sites:
        owner = s.binding.script_name or s.worker
        w = by_name.get(owner)
        if w is None or not w.js:
            what = "a worker" if w is None else "a JavaScript worker"
            s.file.problem(f"{s.key_path}.script_name", f'"{owner}" is not {what} of this config')
            continue
        if any(c.class_name == s.binding.class_name for c in w.durable_classes):
            continue
        c = s.binding.class_name
        where = "this worker" if owner == s.worker else f'worker "{owner}"'
        s.file.problem(
            f"{s.key_path}.class_name",
            f'class "{c}" is not defined by a migration of {where}: add a migration, e.g. '
            f'[[migrations]] tag = "v1" new_sqlite_classes = ["{c}"]',
        )
