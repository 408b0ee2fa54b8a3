"""The ``ocd`` command. The only module that configures logging or exits the process.

Exit codes: 0 clean stop, 1 a background task died, 2 usage or config error,
3 startup failure (port taken, database unwritable or locked).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from ocd.config import Config, load_config
from ocd.daemon import Daemon, StartupError
from ocd.errors import ConfigError, WorkerLoadError
from ocd.loader import LoadedWorker, load_worker

log = logging.getLogger("ocd")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_STARTUP = 0, 1, 2, 3

_RECORD_FIELDS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, event, msg, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", "log"),
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and key not in out:
                out[key] = value
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        formatter: logging.Formatter = JsonFormatter()
        formatter.converter = __import__("time").gmtime
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiosqlite").setLevel(logging.WARNING)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ocd", description="A durable, self-hosted Cloudflare Workers Queues runtime."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def config_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "-c",
            "--config",
            default=os.environ.get("OCD_CONFIG", "ocd.toml"),
            help="config file (default: $OCD_CONFIG or ./ocd.toml)",
        )
        p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
        p.add_argument("--log-format", default="text", choices=["text", "json"])

    serve = sub.add_parser("serve", help="run the daemon")
    config_arg(serve)
    check = sub.add_parser(
        "check-config", help="validate the config and import every worker, then exit"
    )
    config_arg(check)
    return parser


def _load(path: str) -> tuple[Config, list[LoadedWorker]]:
    """Exactly the validation ``serve`` runs; raises ConfigError listing every problem."""
    config = load_config(path)
    for warning in config.warnings:
        log.warning("%s", warning, extra={"event": "config_warning"})
    workers: list[LoadedWorker] = []
    failures: list[WorkerLoadError] = []
    for w in config.workers:
        try:
            workers.append(load_worker(w))
        except WorkerLoadError as e:
            failures.append(e)
    if failures:
        raise _WorkerErrors(failures)
    return config, workers


class _WorkerErrors(Exception):
    def __init__(self, errors: list[WorkerLoadError]) -> None:
        self.errors = errors


def _report_config_errors(e: ConfigError | _WorkerErrors) -> None:
    if isinstance(e, ConfigError):
        lines = [str(p) for p in e.problems]
    else:
        lines = [str(err) for err in e.errors]
    print(f"ocd: configuration has {len(lines)} problem(s):", file=sys.stderr)
    for line in lines:
        print(f"  {line}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        config, workers = _load(args.config)
    except (ConfigError, _WorkerErrors) as e:
        _report_config_errors(e)
        return EXIT_CONFIG
    if args.command == "check-config":
        print(
            f"{args.config}: OK ({len(workers)} worker(s), {len(config.queues)} queue(s), "
            f"{sum(len(w.config.consumers) for w in workers)} consumer(s))"
        )
        return EXIT_OK
    return _run(_serve(config, workers))


def _run(coro: Any) -> int:
    try:
        import uvloop

        factory: Any = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        result: int = runner.run(coro)
        return result


async def _serve(config: Config, workers: list[LoadedWorker]) -> int:
    daemon = Daemon(config, workers)
    try:
        await daemon.start()
    except StartupError as e:
        log.error("cannot start: %s", e, extra={"event": "startup_failed"})
        return EXIT_STARTUP
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

    loop.add_signal_handler(signal.SIGTERM, on_signal, "SIGTERM")
    loop.add_signal_handler(signal.SIGINT, on_signal, "SIGINT")
    stopped = asyncio.ensure_future(stop.wait())
    failed = asyncio.ensure_future(daemon.wait_failed())
    await asyncio.wait({stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    failed.cancel()
    await daemon.shutdown()
    return EXIT_FAILED if daemon.failure is not None else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
