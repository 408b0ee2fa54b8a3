"""``ocd consume``: a worker's unchanged ``queue(batch, env, ctx)`` handler run on another
machine, fed by ocd's REST pull API (the worker pattern of hosted queue services).

Each loop long-polls ``POST .../messages/pull``, hands the batch to the handler as a runtime
``MessageBatch`` (ids, timestamps, attempts and bodies as an in-daemon consumer sees them),
decides each message's outcome by the same rules (``ocd.decide``: explicit ``ack()`` >
``retry()`` > ``ackAll()`` > ``retryAll()`` > the handler's outcome; on a FIFO queue
``hold_back``), and sends it back in one ``.../messages/ack`` call. The daemon applies
``max_retries`` and the dead-letter queue there, as for any pull consumer. The worker's
producer bindings (``--producer BINDING=QUEUE``) push over the REST API.

Nothing is lost if the process dies: its messages are leased, and a lease lapses after the
visibility timeout, when the messages come back. SIGTERM (or SIGINT) drains: no new pulls,
the batches in hand finish and are acknowledged, then the process exits.

``--concurrency auto`` runs as many batches at once as the backlog fills (the pull reply's
``message_backlog_count`` / batch size), from one up to ``--max-concurrency``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import logging
import math
import os
import signal
import sys
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import aiohttp

import runtime
from ocd import codec, limits
from ocd.cli.logs import setup_logging
from ocd.config import WorkerConfig
from ocd.errors import WorkerLoadError
from ocd.loader import Handler, load_worker
from ocd.pipeline import RETRIED, UNRECORDED, Faults, Route, Settlement, deliver
from ocd.python_handler import PythonInvoke
from ocd.store import Delivery, Settled
from runtime import ExecutionContext, MessageBatch

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENCY = 8
PULL_WAIT_MS = 20_000  # the longest long poll the pull API holds
BACKOFF_S = (0.5, 1, 2, 5)  # between failed calls to an unreachable or failing daemon
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
HANDLER_TIMEOUT_S = 900.0  # a batch's wall-clock limit, Cloudflare's


class ConsumeError(Exception):
    """A setting the daemon refused (no such queue, no pull consumer, a bad token)."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "consume", help="run a worker's queue() handler here, pulling from a remote ocd"
    )
    p.add_argument("--url", default=os.environ.get("OCD_URL", "http://127.0.0.1:8787"))
    p.add_argument("--queue", required=True, help="the queue to consume (name or id)")
    p.add_argument("--worker", required=True, type=Path, help="the worker module (a .py file)")
    p.add_argument("--account", default=os.environ.get("OCD_ACCOUNT", "local"))
    p.add_argument(
        "--token-env",
        default="OCD_API_TOKEN",
        metavar="VAR",
        help="environment variable holding the API token (default OCD_API_TOKEN)",
    )
    p.add_argument(
        "--concurrency",
        default="1",
        help="batches in flight at once: a number, or auto (scaled with the backlog)",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=DEFAULT_MAX_CONCURRENCY,
        help=f"the cap of --concurrency auto (default {DEFAULT_MAX_CONCURRENCY})",
    )
    p.add_argument("--batch-size", type=int, help="messages per batch, 1..100 (the consumer's)")
    p.add_argument(
        "--visibility-timeout", type=int, metavar="S", help="lease length in seconds (consumer's)"
    )
    p.add_argument(
        "--producer",
        action="append",
        default=[],
        metavar="BINDING=QUEUE",
        help="a producer binding of the worker, sending over the REST API (repeatable)",
    )
    p.add_argument(
        "--var", action="append", default=[], metavar="NAME=VALUE", help="an env var (repeatable)"
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", default="text", choices=["text", "json"])


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise ConsumeError(f"error: {flag} takes NAME=VALUE, got {v!r}")
        out[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    try:
        consumer = Consumer.from_args(args)
    except ConsumeError as e:
        print(e, file=sys.stderr)
        return EXIT_USAGE
    except WorkerLoadError as e:
        print(f"ocd: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(consumer.main())
    except ConsumeError as e:
        print(e, file=sys.stderr)
        return EXIT_ERROR


class RestQueue:
    """A producer binding's backend that sends over the REST API."""

    def __init__(self, consumer: Consumer, queue: str) -> None:
        self.consumer = consumer
        self.queue = queue

    async def send_batch(
        self, items: Sequence[tuple[Any, Any, Any, Any, Any]], batch_delay: Any
    ) -> dict[str, Any]:
        messages = []
        for body, ctype, delay, group, dedup in items:
            ct = codec.normalize_content_type(ctype) if ctype is not None else "json"
            m: dict[str, Any] = {"body": body, "content_type": ct}
            for key, value in (
                ("delay_seconds", delay),
                ("message_group_id", group),
                ("message_deduplication_id", dedup),
            ):
                if value is not None:
                    m[key] = value
            messages.append(m)
        req: dict[str, Any] = {"messages": messages}
        if batch_delay is not None:
            req["delay_seconds"] = batch_delay
        out = await self.consumer.call("POST", f"/queues/{_q(self.queue)}/messages/batch", req)
        return _metrics(out["metadata"]["metrics"])

    async def metrics(self) -> dict[str, Any]:
        return _metrics(await self.consumer.call("GET", f"/queues/{_q(self.queue)}/metrics"))


def _metrics(m: dict[str, Any]) -> dict[str, Any]:
    oldest = m.get("oldest_message_timestamp_ms") or 0
    return {
        "backlogCount": m["backlog_count"],
        "backlogBytes": m["backlog_bytes"],
        "oldestMessageTimestamp": dt.datetime.fromtimestamp(oldest / 1000, dt.UTC)
        if oldest
        else None,
    }


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


class Consumer:
    def __init__(
        self,
        url: str,
        account: str,
        token: str | None,
        queue: str,
        worker: str,
        handler: Handler,
        env_values: dict[str, Any],
        producers: dict[str, str],
        concurrency: int | None,
        max_concurrency: int,
        batch_size: int | None,
        visibility_s: int | None,
    ) -> None:
        self.base = f"{url.rstrip('/')}/client/v4/accounts/{_q(account)}"
        self.token = token
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency  # None: auto
        self.max_concurrency = max_concurrency
        self.batch_size = batch_size
        self.visibility_s = visibility_s
        values: dict[str, Any] = dict(env_values)
        for binding, q in producers.items():
            values[binding] = runtime.Queue(q, RestQueue(self, q))
        self.env = runtime.Env(values)
        self.retry_delay_s = 0
        self.dead_letter_queue: str | None = None
        self.worker = worker
        self.timeout_s = HANDLER_TIMEOUT_S
        self.aborting = asyncio.Event()  # never set: a drain lets batches finish
        self.faults = Faults()
        self.fifo = queue.endswith(".fifo")
        self.stopping = asyncio.Event()
        self.session: aiohttp.ClientSession | None = None
        self.target = 1  # loops that should run (auto: follows the backlog)
        self.loops: dict[int, asyncio.Task[None]] = {}
        self.pulls: set[asyncio.Task[Any]] = set()
        self.batches = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Consumer:
        if args.concurrency == "auto":
            concurrency = None
        else:
            try:
                concurrency = int(args.concurrency)
            except ValueError:
                concurrency = 0
            if not 1 <= concurrency <= 1000:
                raise ConsumeError(
                    f"error: --concurrency must be 1..1000 or auto, got {args.concurrency!r}"
                )
        if not 1 <= args.max_concurrency <= 1000:
            raise ConsumeError("error: --max-concurrency must be 1..1000")
        if args.batch_size is not None and not 1 <= args.batch_size <= 100:
            raise ConsumeError("error: --batch-size must be 1..100")
        if (
            args.visibility_timeout is not None
            and args.visibility_timeout not in limits.VISIBILITY_S
        ):
            raise ConsumeError(
                f"error: --visibility-timeout must be {limits.VISIBILITY_S.text} seconds"
            )
        if not args.worker.is_file():
            raise ConsumeError(f"error: --worker {args.worker}: no such file")
        wc = WorkerConfig(
            name=args.worker.stem,
            key_path="--worker",
            source=args.worker,
            main=args.worker.resolve(),
            module=None,
            routes=(),
            vars=MappingProxyType(_pairs(args.var, "--var")),
        )
        loaded = load_worker(wc)
        if loaded.queue is None:
            raise ConsumeError(f"error: {args.worker} has no queue() handler")
        token = os.environ.get(args.token_env) or None
        _logging(args.log_level, args.log_format)
        return cls(
            args.url,
            args.account,
            token,
            args.queue,
            wc.name,
            loaded.queue,
            dict(wc.vars),
            _pairs(args.producer, "--producer"),
            concurrency,
            args.max_concurrency,
            args.batch_size,
            args.visibility_timeout,
        )

    # ------------------------------------------------------------ HTTP

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        assert self.session is not None
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with self.session.request(method, self.base + path, json=body, headers=headers) as r:
            try:
                out = await r.json(content_type=None)
            except ValueError:
                out = None
            if r.status >= 400 or not isinstance(out, dict) or not out.get("success"):
                errors = (out or {}).get("errors") if isinstance(out, dict) else None
                text = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors or [])
                err = ApiRefused(r.status, text or f"HTTP {r.status}")
                raise err
            return out["result"]

    # ------------------------------------------------------------ running

    async def main(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, sig.name)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        async with aiohttp.ClientSession(timeout=timeout) as self.session:
            try:
                consumers = await self.call("GET", f"/queues/{_q(self.queue)}/consumers")
            except ApiRefused as e:
                raise ConsumeError(f"error: queue {self.queue}: {e}") from None
            except aiohttp.ClientError as e:
                raise ConsumeError(f"error: cannot reach ocd at {self.base}: {e}") from None
            pull = next((c for c in consumers if c.get("type") == "http_pull"), None)
            if pull is None:
                raise ConsumeError(
                    f"error: queue {self.queue} has no HTTP pull consumer; add one first "
                    f"(ocd queues consumer http add {self.queue})"
                )
            settings = pull.get("settings") or {}
            self.retry_delay_s = int(settings.get("retry_delay") or 0)
            self.dead_letter_queue = pull.get("dead_letter_queue") or None
            if self.batch_size is None:
                self.batch_size = int(settings.get("batch_size") or 10)
            self.target = self.concurrency or 1
            log.info(
                "consuming %s from %s (batch size %d, concurrency %s)",
                self.queue,
                self.base,
                self.batch_size,
                self.concurrency or f"auto up to {self.max_concurrency}",
                extra={"event": "consume_started", "queue": self.queue},
            )
            self._scale()
            while self.loops:
                await asyncio.wait(list(self.loops.values()), return_when=asyncio.FIRST_COMPLETED)
                self._scale()
        log.info(
            "stopped after %d batch(es)",
            self.batches,
            extra={"event": "consume_stopped", "batches": self.batches},
        )
        return EXIT_OK

    def stop(self, signame: str = "SIGTERM") -> None:
        if self.stopping.is_set():
            return
        log.info("%s received; draining", signame, extra={"event": "signal"})
        self.stopping.set()
        for p in list(self.pulls):  # a pull in progress leases nothing we will see: lapses
            p.cancel()

    def _scale(self) -> None:
        """Start loops up to the target (loops above it end after their batch)."""
        for i, t in list(self.loops.items()):
            if t.done():
                del self.loops[i]
                if not t.cancelled() and t.exception() is not None:
                    log.error(
                        "a consume loop failed",
                        exc_info=t.exception(),
                        extra={"event": "consume_loop_failed"},
                    )
        if self.stopping.is_set():
            return
        for i in range(self.target):
            if i not in self.loops:
                self.loops[i] = asyncio.create_task(self._loop(i), name=f"ocd-consume-{i}")

    def _follow(self, backlog: int) -> None:
        if self.concurrency is not None or self.batch_size is None:
            return
        wanted = max(1, min(self.max_concurrency, math.ceil(backlog / self.batch_size)))
        if wanted != self.target:
            log.info(
                "backlog %d: %d batch(es) at once",
                backlog,
                wanted,
                extra={"event": "consume_scaled", "backlog": backlog, "concurrency": wanted},
            )
            self.target = wanted
            self._scale()

    async def _loop(self, index: int) -> None:
        failures = 0
        while not self.stopping.is_set() and index < self.target:
            hold_s = self.faults.hold_until - time.monotonic()
            if hold_s > 0:  # backing off after a failure of ocd's own
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), hold_s)
                continue
            req: dict[str, Any] = {"batch_size": self.batch_size, "wait_ms": PULL_WAIT_MS}
            if self.visibility_s is not None:
                req["visibility_timeout_ms"] = self.visibility_s * 1000
            pull = asyncio.ensure_future(
                self.call("POST", f"/queues/{_q(self.queue)}/messages/pull", req)
            )
            self.pulls.add(pull)
            try:
                result = await pull
            except asyncio.CancelledError:
                if self.stopping.is_set():
                    return
                raise
            except (TimeoutError, ApiRefused, aiohttp.ClientError) as e:
                delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
                failures += 1
                log.warning(
                    "pull failed (%s); again in %.1f s",
                    e,
                    delay,
                    extra={"event": "consume_pull_failed"},
                )
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), delay)
                continue
            finally:
                self.pulls.discard(pull)
            failures = 0
            self._follow(int(result.get("message_backlog_count") or 0))

            backlog = int(result.get("message_backlog_count") or 0)
            if result["messages"]:  # a drain lets it finish: only pulls are cancelled
                await self._batch(result["messages"], backlog)

    async def _batch(self, raw: list[dict[str, Any]], backlog: int) -> None:
        """One pulled batch through the delivery pipeline that push consumers use: decoded
        per message (an undecodable body is dead-lettered at once), the handler run, the
        outcome decided by the same rules and sent back in one ack call."""
        deliveries = [_delivery(i, m) for i, m in enumerate(raw)]
        leases = _RestLeases(self, {i: m["lease_id"] for i, m in enumerate(raw)})
        # the pull reply's backlog; its bytes and oldest message are not in it
        metrics = {"backlogCount": backlog, "backlogBytes": 0, "oldestMessageTimestamp": None}

        async def batch_metrics() -> dict[str, Any]:
            return metrics

        invoke = PythonInvoke(
            self.run_handler, self.timeout_s, self.aborting, self.worker, self.queue
        )
        route = Route(
            self.queue, self.worker, self.fifo, self.retry_delay_s, self.dead_letter_queue
        )

        def fault(e: BaseException) -> None:
            self.faults.failed(self.queue, e, RETRIED)

        try:
            result = await deliver(route, deliveries, invoke, leases, batch_metrics, fault)
        except Exception as e:  # the ack did not reach the daemon: the leases lapse
            self.faults.failed(self.queue, e, UNRECORDED)
            return
        if result.fault is None:
            self.faults.ok(self.queue)
        self.batches += 1

    async def run_handler(self, batch: MessageBatch, ctx: ExecutionContext) -> Any:
        return await self.handler(batch, self.env, ctx)


class _RestLeases:
    """Leases held through the REST pull API: settled by one ``.../messages/ack`` call,
    where the daemon applies ``max_retries`` and the dead-letter queue."""

    def __init__(self, consumer: Consumer, leases: dict[int, str]) -> None:
        self.consumer = consumer
        self.leases = leases

    async def settle(self, s: Settlement) -> Settled:
        lease = self.leases
        body: dict[str, Any] = {
            "acks": [{"lease_id": lease[d.seq]} for d in s.acks],
            "retries": [{"lease_id": lease[d.seq], "delay_seconds": t} for d, t in s.retries],
        }
        if s.undecodable:
            body["undecodable"] = [
                {"lease_id": lease[u.delivery.seq], "reason": u.reason} for u in s.undecodable
            ]
        path = f"/queues/{_q(self.consumer.queue)}/messages/ack"
        for attempt in range(len(BACKOFF_S) + 1):
            try:
                out = await self.consumer.call("POST", path, body)
                break
            except (TimeoutError, ApiRefused, aiohttp.ClientError) as e:
                if attempt == len(BACKOFF_S):  # the leases lapse; the messages come back
                    log.error(
                        "ack failed (%s); the messages come back when their leases lapse",
                        e,
                        extra={"event": "consume_ack_failed"},
                    )
                    raise
                await asyncio.sleep(BACKOFF_S[attempt])
        acked = int(out.get("ackCount") or 0)
        retried = int(out.get("retryCount") or 0)
        return Settled(acked, retried, len(s.undecodable), 0)

    async def give_back(self, deliveries: Sequence[Delivery]) -> int:
        """Nothing to do: a consume process drains its batches; a lease it leaves lapses."""
        return 0


class ApiRefused(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status = status


def _delivery(index: int, m: dict[str, Any]) -> Delivery:
    """A pulled message as the pipeline's ``Delivery`` (its raw body and content type; the
    pull reply's index stands for its seq). A body that is not the base64 it should be
    keeps the text it came as and an unknown content type, so decoding it fails."""
    ctype = (m.get("metadata") or {}).get("CF-Content-Type", "json")
    raw = m["body"]
    if ctype == "text":
        data = raw.encode()
    else:
        try:
            data = base64.b64decode(raw, validate=True)
        except (ValueError, TypeError):
            data, ctype = str(raw).encode(), f"{ctype} (not base64)"
    return Delivery(
        index,
        m["id"],
        ctype,
        data,
        m["timestamp_ms"],
        m["attempts"],
        0,
        m.get("message_group_id"),
        m.get("sequence_number"),
        m.get("message_deduplication_id"),
    )


def _logging(level: str, fmt: str) -> None:
    setup_logging(level, fmt)
