"""The ``ocd`` command. The only module that configures logging or exits the process.

Exit codes: 0 clean stop, 1 a background task died, 2 usage or config error,
3 startup failure (port taken, database unwritable, locked, damaged, or older than what ocd
committed to it: see ``--accept-data-loss``). ``ocd queues`` and
``ocd token`` (in ``ocd.cli.queues``): 0 done, 1 an API error or an unreachable daemon,
2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ocd.cli import consume
from ocd.cli import d1 as cli_d1
from ocd.cli import queues as cli_queues
from ocd.cli.logs import setup_logging
from ocd.config import PROJECT_FILES, Config, find_project, load_config
from ocd.config.project import DEFAULT_FILE
from ocd.errors import ConfigError, WorkerLoadErrors
from ocd.loader import LoadedWorker, load_workers

# The daemon allocates and frees several small containers a message (rows, tuples, the
# bridge's headers) and makes little cyclic garbage, so Python's cycle collector, run every
# 700 net allocations by default, found little and cost about a microsecond a message end to
# end, half of it in a full collection during the run (docs/performance.md). The daemon's
# young generation holds this many objects instead.
GC_YOUNG = 10_000

log = logging.getLogger("ocd")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_STARTUP = 0, 1, 2, 3


def _port(value: str) -> int:
    if value.isascii() and value.isdigit() and int(value) <= 65535:
        return int(value)
    raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {value!r}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ocd", description="A durable, self-hosted Cloudflare Workers Queues runtime."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def config_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "-c",
            "--config",
            default=os.environ.get("OCD_CONFIG"),
            help="ocd.toml, a project's cf.config.ts, or a Worker project's wrangler.jsonc / "
            ".json / .toml (default: $OCD_CONFIG, else the first of "
            + ", ".join(n for n, _ in PROJECT_FILES)
            + " in the current folder)",
        )
        p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
        p.add_argument("--log-format", default="text", choices=["text", "json"])

    def port_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--port",
            type=_port,
            metavar="N",
            help="listen on port N (instead of the config's, or 8787 for a wrangler project)",
        )

    def accept_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--accept-data-loss",
            action="store_true",
            help="start even though the database is older than what ocd committed to it "
            "(a lost or damaged WAL, a replaced file), running on what it holds",
        )

    serve = sub.add_parser("serve", help="run the daemon (SIGHUP reloads the config)")
    config_arg(serve)
    port_arg(serve)
    accept_arg(serve)
    dev = sub.add_parser(
        "dev", help="serve, and reload whenever the config or a worker's code changes"
    )
    config_arg(dev)
    port_arg(dev)
    accept_arg(dev)
    check = sub.add_parser(
        "check-config", help="validate the config and import every worker, then exit"
    )
    config_arg(check)
    status = sub.add_parser("status", help="a running daemon's queues and consumers")
    status.add_argument(
        "--url",
        default=os.environ.get("OCD_URL", "http://127.0.0.1:8787"),
        help="the daemon (default: $OCD_URL or http://127.0.0.1:8787)",
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    backup = sub.add_parser("backup", help="copy a (live) daemon's database to a file")
    config_arg(backup)
    backup.add_argument("--to", required=True, type=Path, metavar="FILE")
    restore = sub.add_parser("restore", help="put a backup in place (ocd must be stopped)")
    config_arg(restore)
    restore.add_argument("--from", dest="source", required=True, type=Path, metavar="FILE")
    migrate = sub.add_parser(
        "migrate-store",
        help="copy a stopped SQLite node's queues and messages into PostgreSQL",
    )
    migrate.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="CONFIG_OR_PATH",
        help="the SQLite node's config file, data directory or scheduler.sqlite",
    )
    migrate.add_argument(
        "--to", dest="dsn", required=True, metavar="DSN", help="postgresql://user@host/db"
    )
    migrate.add_argument(
        "--force", action="store_true", help="replace what the target database already holds"
    )
    cli_queues.add_parsers(sub)
    consume.add_parser(sub)
    cli_d1.add_parser(sub, config_arg)
    return parser


def _project(given: str | None) -> str:
    """The file named with ``-c`` (or ``$OCD_CONFIG``), else the current folder's project
    file (``ocd.toml``, ``wrangler.jsonc``, ...); ``ocd.toml`` when there is none, for the
    "file not found" that names it."""
    if given:
        return given
    found = find_project(Path())
    return str(found) if found is not None else DEFAULT_FILE


def _load(path: str, port: int | None = None) -> tuple[Config, list[LoadedWorker]]:
    """Exactly the validation ``serve`` (and a reload) runs; raises ConfigError or
    WorkerLoadErrors listing every problem."""
    config = load_config(path, port=port)
    for warning in config.warnings:
        log.warning("%s", warning, extra={"event": "config_warning"})
    workers = load_workers(config.workers)
    from ocd.catchall import catch_all, serving
    from ocd.js.host import check

    js = check(config)  # JavaScript workers: toolchain, dates, bundles, and workerd loading them
    catch_all(config, serving(workers, js.serving if js is not None else ()))
    return config, workers


def _report_config_errors(e: ConfigError | WorkerLoadErrors) -> None:
    if isinstance(e, ConfigError):
        lines = [str(p) for p in e.problems]
    else:
        lines = [str(err) for err in e.errors]
    print(f"ocd: configuration has {len(lines)} problem(s):", file=sys.stderr)
    for line in lines:
        print(f"  {line}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in cli_queues.COMMANDS:
        return cli_queues.run(args)
    if args.command == "consume":
        return consume.run(args)
    from ocd.cli import ops as cli_ops

    if args.command == "status":
        return cli_ops.status(args.url, args.json)
    if args.command == "migrate-store":
        setup_logging("warning", "text")
        return cli_ops.migrate_store(args.source, args.dsn, args.force)
    setup_logging(args.log_level, args.log_format)
    args.config = _project(args.config)
    if args.command == "d1":
        return cli_d1.run(args)
    if args.command in ("backup", "restore"):
        try:
            config = load_config(args.config)
        except ConfigError as e:
            _report_config_errors(e)
            return EXIT_CONFIG
        if args.command == "backup":
            return cli_ops.run_backup(config, args.to)
        return cli_ops.run_restore(config, args.source)
    try:
        config, workers = _load(args.config, getattr(args, "port", None))
    except (ConfigError, WorkerLoadErrors) as e:
        _report_config_errors(e)
        return EXIT_CONFIG
    if args.command == "check-config":
        print(
            f"{args.config}: OK ({len(config.workers)} worker(s), {len(config.queues)} queue(s), "
            f"{sum(len(w.consumers) for w in config.workers)} consumer(s))"
        )
        return EXIT_OK
    return _run(
        _serve(config, workers, dev=args.command == "dev", accept_data_loss=args.accept_data_loss)
    )


def _log_tasks() -> None:
    """SIGUSR1: log where every task of the daemon is waiting (for a daemon that seems
    stuck; the process goes on as before)."""
    import io

    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(limit=12, file=out)
        log.warning("task %s:\n%s", task.get_name(), out.getvalue(), extra={"event": "task_stack"})


def _run(coro: Any) -> int:
    try:
        import uvloop

        factory: Any = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        result: int = runner.run(coro)
        return result


async def _serve(
    config: Config, workers: list[LoadedWorker], dev: bool = False, accept_data_loss: bool = False
) -> int:
    # Imported here: the daemon pulls in aiohttp and the store, which the client commands
    # (ocd queues, ocd token) do not need at every invocation.
    from ocd.daemon import Daemon
    from ocd.errors import StartupError

    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
    daemon = Daemon(config, workers, accept_data_loss=accept_data_loss)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = 0

    def on_signal(signame: str) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            log.info("%s received; stopping", signame, extra={"event": "signal"})
            stop.set()
        elif signame == "SIGINT":
            log.warning("second SIGINT: forcing shutdown", extra={"event": "forced"})
            daemon.force()

    # Before the start: a stop asked for while it runs (or just after its "started" line,
    # before this coroutine runs again) shuts down cleanly once it is done, instead of
    # meeting the default action of the signal.
    loop.add_signal_handler(signal.SIGTERM, on_signal, "SIGTERM")
    loop.add_signal_handler(signal.SIGINT, on_signal, "SIGINT")
    try:
        await daemon.start()
    except StartupError as e:
        log.error("cannot start: %s", e, extra={"event": "startup_failed"})
        return EXIT_STARTUP

    reloads: set[asyncio.Task[bool]] = set()

    def on_hup() -> None:
        log.info("SIGHUP received; reloading", extra={"event": "signal"})
        task = asyncio.ensure_future(daemon.reload())
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, on_hup)
    loop.add_signal_handler(signal.SIGUSR1, _log_tasks)
    watcher = None
    if dev:
        from ocd.cli.ops import watch_and_reload

        watcher = asyncio.ensure_future(watch_and_reload(daemon, stop))
    stopped = asyncio.ensure_future(stop.wait())
    failed = asyncio.ensure_future(daemon.wait_failed())
    await asyncio.wait({stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    failed.cancel()
    stop.set()
    if watcher is not None:
        await asyncio.wait({watcher}, timeout=5)
    if reloads:
        await asyncio.wait(set(reloads), timeout=30)
    await daemon.shutdown()
    return EXIT_FAILED if daemon.failure is not None else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
