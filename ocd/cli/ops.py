"""Operator commands: ``ocd dev`` (serve + reload on file changes), ``ocd status``,
``ocd backup`` and ``ocd restore``. ``ocd.cli`` parses the arguments and exits."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ocd.config import Config
from ocd.daemon import Daemon
from ocd.errors import StoreError
from ocd.store.sqlite.backup import backup, restore

log = logging.getLogger("ocd")

DEBOUNCE_MS = 300


def watched_paths(config: Config) -> list[Path]:
    """The config file, every wrangler or cf.config file, and every worker module's folder."""
    paths = {config.path}
    for w in config.workers:
        if w.source != config.path:
            paths.add(Path(w.source).resolve())
        if w.main is not None:
            paths.add(w.main.parent)
        elif w.module is not None:
            spec = importlib.util.find_spec(w.module.split(".")[0])
            if spec is not None and spec.origin:
                paths.add(Path(spec.origin).parent)
    return sorted(paths)


async def watch_and_reload(daemon: Daemon, stop: asyncio.Event) -> None:
    """Reload the daemon whenever a watched file changes (debounced), until ``stop``."""
    import watchfiles

    while not stop.is_set():
        paths = watched_paths(daemon.config)
        log.info("watching %s", ", ".join(str(p) for p in paths), extra={"event": "dev_watching"})
        # ocd's own writes (the database, JS bundles) may be inside a watched folder
        own = [daemon.config.server.data_dir.resolve(), daemon.config.store.data_dir.resolve()]
        async for changes in watchfiles.awatch(
            *paths, stop_event=stop, debounce=DEBOUNCE_MS, recursive=True
        ):
            changed = sorted(
                {
                    str(Path(p))
                    for _, p in changes
                    if not p.endswith(".pyc") and not _inside(Path(p), own)
                }
            )
            if not changed:
                continue
            log.info("changed: %s; reloading", ", ".join(changed), extra={"event": "dev_changed"})
            await daemon.reload()
            if watched_paths(daemon.config) != paths:
                break  # workers came or went: watch the new set


def _inside(path: Path, folders: list[Path]) -> bool:
    return any(path.resolve().is_relative_to(f) for f in folders)


def status(url: str, as_json: bool) -> int:
    """Print a running daemon's workers, queues and consumers; 0 when it is ready."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/__ocd/status", timeout=10) as r:
            data: dict[str, Any] = json.load(r)
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        print(f"ocd: cannot reach ocd at {url}: {reason}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        print(f"state: {data['state']}")
        print(f"workers: {', '.join(data['workers']) or 'none'}")
        if "workerd" in data:
            print(f"workerd: {data['workerd']}")
        rows = [["QUEUE", "BACKLOG", "IN FLIGHT", "DELAYED", "OLDEST (s)", "NOTES"]]
        for q in data["queues"]:
            notes = [
                n for n, on in (("paused", q["paused"]), ("dlq", q["dead_letter_queue"])) if on
            ]
            name = q["name"] if q["account"] == "local" else f"{q['account']}/{q['name']}"
            rows.append(
                [
                    name,
                    q["backlog"],
                    q["inflight"],
                    q["delayed"],
                    q["oldest_age_s"],
                    ",".join(notes),
                ]
            )
        _table(rows)
        bindings = data.get("bindings", [])  # an older ocd reports none
        if bindings:
            rows = [["WORKER", "BINDING", "KIND", "TARGET"]]
            rows += [[b["worker"], b["name"], b["kind"], b["target"]] for b in bindings]
            _table(rows)
        rows = [["CONSUMER OF", "WORKER", "BATCHES IN FLIGHT", "LAST BATCH"]]
        for c in data["consumers"]:
            last = c["last_batch"]
            summary = (
                f"{last['outcome']}: {last['acked']} acked, {last['retried']} retried, "
                f"{last['dead_lettered']} dead-lettered"
                if last
                else "-"
            )
            rows.append([c["queue"], c["worker"], c["inflight_batches"], summary])
        _table(rows)
    return 0 if data["state"] == "ready" else 1


def _table(rows: list[list[Any]]) -> None:
    print()
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


_PG_TOOLS = (
    "this config's store is PostgreSQL ({dsn}); back it up and restore it with PostgreSQL's "
    "own tools: pg_dump / pg_restore for copies, streaming replication or PITR for a "
    "standby. ocd backup and ocd restore copy SQLite data directories only"
)


def run_backup(config: Config, dest: Path) -> int:
    if config.store.backend != "sqlite":
        print(f"ocd: {_PG_TOOLS.format(dsn=config.store.dsn_redacted)}", file=sys.stderr)
        return 2
    try:
        size = backup(config.server.data_dir, dest)
    except StoreError as e:
        print(f"ocd: {e}", file=sys.stderr)
        return 1
    print(f"backed up {config.server.data_dir} to {dest} ({size} bytes)")
    return 0


def run_restore(config: Config, src: Path) -> int:
    if config.store.backend != "sqlite":
        print(f"ocd: {_PG_TOOLS.format(dsn=config.store.dsn_redacted)}", file=sys.stderr)
        return 2
    try:
        restore(src, config.server.data_dir)
    except StoreError as e:
        print(f"ocd: {e}", file=sys.stderr)
        return 1
    print(f"restored {src} into {config.server.data_dir}; start ocd to use it")
    return 0


def migrate_store(source: str, dsn: str, force: bool) -> int:
    """``ocd migrate-store``: copy a stopped SQLite node into PostgreSQL."""
    from ocd.clock import wall_ms
    from ocd.config import load_config
    from ocd.dsn import redact_dsn
    from ocd.errors import ConfigError, OcdError
    from ocd.store.sqlite.store import DB_NAME
    from ocd.store.transfer import sqlite_to_postgres

    path = Path(source)
    if path.is_file() and path.name == DB_NAME:
        data_dir = path.parent
    elif path.is_dir():
        data_dir = path
    elif path.is_file():
        try:
            config = load_config(path)
        except ConfigError as e:
            print(f"ocd: {e}", file=sys.stderr)
            return 2
        if config.store.backend != "sqlite":
            print(f"ocd: {path} does not use the SQLite store", file=sys.stderr)
            return 2
        data_dir = config.store.data_dir
    else:
        print(f"ocd: {source}: no such config file, data directory or database", file=sys.stderr)
        return 2
    try:
        copied = asyncio.run(sqlite_to_postgres(data_dir, dsn, wall_ms(), force))
    except OcdError as e:
        print(f"ocd: {e}", file=sys.stderr)
        return 1
    print(
        f"copied {copied.queues} queue(s), {copied.consumers} pull consumer(s) and "
        f"{copied.messages} message(s) from {data_dir / DB_NAME} to {redact_dsn(dsn)}; "
        "point the nodes' [store] at it and start them"
    )
    return 0
