"""``ocd d1``: wrangler's ``d1 migrations apply`` and ``d1 execute`` against ocd's files.

NAME is a ``d1_databases`` entry's ``database_name`` (or its binding, as wrangler allows).
They open ``<data_dir>/d1/<database_id>.sqlite`` directly, so they work whether ocd runs or
not: SQLite's lock keeps a running ocd's batches and these apart.
Exit codes: 0 done, 1 a statement failed, 2 usage or config error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ocd.config import Config, D1DatabaseConfig, load_config
from ocd.errors import ConfigError, D1Error

if TYPE_CHECKING:
    from ocd.store.sqlite.d1 import D1File

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    config_arg: Callable[[argparse.ArgumentParser], None],
) -> None:
    d1 = sub.add_parser("d1", help="D1 databases: migrations and SQL, as wrangler d1")
    kinds = d1.add_subparsers(dest="d1_command", required=True, metavar="COMMAND")
    migrations = kinds.add_parser("migrations", help="apply a database's migrations")
    ops = migrations.add_subparsers(dest="migrations_command", required=True, metavar="COMMAND")
    apply = ops.add_parser("apply", help="apply the migrations not yet applied, in order")
    execute = kinds.add_parser("execute", help="run SQL against a database")
    for p in (apply, execute):
        config_arg(p)
        p.add_argument("name", metavar="NAME", help="the database_name (or binding)")
        p.add_argument("--local", action="store_true", help="accepted; ocd's files are local")
    what = execute.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--command", dest="sql", metavar="SQL", help="SQL to run (statements split by ;)"
    )
    what.add_argument("--file", type=Path, metavar="FILE", help="a file of SQL to run")
    execute.add_argument("--json", action="store_true", help="print the results as JSON")


def _find(config: Config, name: str) -> D1DatabaseConfig | None:
    found = [d for w in config.workers for d in w.d1_databases if d.database_name == name]
    found = found or [d for w in config.workers for d in w.d1_databases if d.binding == name]
    return found[0] if found else None


def run(args: argparse.Namespace) -> int:
    # Imported here: the SQLite module is the store's, which other client commands skip.
    from ocd import d1

    try:
        config = load_config(args.config)
    except ConfigError as e:
        for p in e.problems:
            print(f"ocd: {p}", file=sys.stderr)
        return EXIT_USAGE
    db = _find(config, args.name)
    if db is None:
        known = sorted({d.database_name for w in config.workers for d in w.d1_databases})
        print(
            f'ocd: no D1 database "{args.name}" in {args.config} '
            f"(known: {', '.join(known) or 'none'})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        file = d1.open_database(config.server.data_dir, db.database_id)
    except D1Error as e:
        print(f"ocd: {db.database_name}: {e}", file=sys.stderr)
        return EXIT_FAILED
    try:
        if args.d1_command == "migrations":
            return _apply(file, db)
        if args.file is not None:
            try:
                script = args.file.read_text()
            except OSError as e:
                print(f"ocd: {args.file}: {e.strerror}", file=sys.stderr)
                return EXIT_USAGE
        else:
            script = args.sql
        try:
            outcomes = d1.execute(file, script)
        except D1Error as e:
            print(f"ocd: D1_ERROR: {e}", file=sys.stderr)
            return EXIT_FAILED
        results = [d1.result_json(o, "ARRAY_OF_OBJECTS") for o in outcomes]
        if args.json:
            print(json.dumps(results, indent=2))
        else:
            for r in results:
                for row in r["results"]:
                    print(json.dumps(row))
            changes = sum(o.changes for o in outcomes)
            print(f"{len(outcomes)} statement(s) executed, {changes} row(s) changed")
        return EXIT_OK
    finally:
        file.close()


def _apply(file: D1File, db: D1DatabaseConfig) -> int:
    from ocd import d1

    try:
        pending = d1.pending_migrations(file, db.migrations_dir, db.migrations_table)
    except D1Error as e:
        print(f"ocd: D1_ERROR: {e}", file=sys.stderr)
        return EXIT_FAILED
    if not pending:
        print("No migrations to apply!")
        return EXIT_OK
    print("Migrations to be applied:")
    for m in pending:
        print(f"  {m.name}")
    for m in pending:
        try:
            d1.apply_migration(file, m, db.migrations_table)
        except D1Error as e:
            print(f"ocd: {m.name}: D1_ERROR: {e}", file=sys.stderr)
            return EXIT_FAILED
        print(f"applied {m.name}")
    return EXIT_OK
