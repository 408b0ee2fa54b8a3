"""Prometheus metrics, exposed at ``/__ocd/metrics`` (prometheus-client does the exposition).

Counters and histograms are fed where things happen (producer, dispatcher, store commits,
retention); per-queue gauges are read from the store at scrape time. Each daemon has its own
registry, so several daemons in one process (tests) do not mix their numbers.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from ocd.counts import queue_counts
from ocd.store import CatalogueReads, Lifecycle, Messages

QUEUE = ("account", "queue")
CONSUMER = ("worker", "queue")


class MetricsStore(Lifecycle, CatalogueReads, Messages, Protocol):
    """What a scrape reads of the store: whether it is full, the queues, their counts."""


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self.sent = Counter("ocd_messages_sent", "Messages stored by sends.", QUEUE, registry=r)
        self.acked = Counter("ocd_messages_acked", "Messages acknowledged.", QUEUE, registry=r)
        self.retried = Counter(
            "ocd_messages_retried", "Messages put back for another attempt.", QUEUE, registry=r
        )
        self.dead_lettered = Counter(
            "ocd_messages_dead_lettered",
            "Messages that ran out of attempts (moved to a dead-letter queue or deleted).",
            QUEUE,
            registry=r,
        )
        self.undecodable = Counter(
            "ocd_messages_undecodable",
            "Messages whose stored body could not be decoded (dead-lettered at once).",
            QUEUE,
            registry=r,
        )
        self.expired = Counter(
            "ocd_messages_expired", "Messages deleted by retention.", QUEUE, registry=r
        )
        self.batch_duration = Histogram(
            "ocd_batch_duration_seconds",
            "Time from claiming a push batch to settling it.",
            CONSUMER,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 900),
            registry=r,
        )
        self.handler_failures = Counter(
            "ocd_handler_failures",
            "Push batches whose handler did not succeed, by outcome.",
            (*CONSUMER, "outcome"),
            registry=r,
        )
        self.cron_runs = Counter(
            "ocd_cron_runs",
            'Cron trigger runs of scheduled() handlers, by outcome ("ok", "exception", "timeout").',
            ("worker", "cron", "outcome"),
            registry=r,
        )
        self.send_commit = Histogram(
            "ocd_send_commit_seconds",
            "Time a send waits for its messages to be committed.",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
            registry=r,
        )
        self.group_commit = Histogram(
            "ocd_group_commit_operations",
            "Operations (sends, claims, settlements) committed by one transaction, by the "
            'thread that committed it ("loop" for small groups on a fast disk, else "writer").',
            ("thread",),
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 4000),
            registry=r,
        )
        self.backlog = Gauge(
            "ocd_queue_backlog_messages", "Unacknowledged messages.", QUEUE, registry=r
        )
        self.backlog_bytes = Gauge(
            "ocd_queue_backlog_bytes", "Bytes of unacknowledged messages.", QUEUE, registry=r
        )
        self.delayed = Gauge(
            "ocd_queue_delayed_messages",
            "Messages not deliverable yet (delayed sends and retries).",
            QUEUE,
            registry=r,
        )
        self.inflight = Gauge(
            "ocd_queue_inflight_messages", "Messages leased to a consumer.", QUEUE, registry=r
        )
        self.oldest_age = Gauge(
            "ocd_queue_oldest_message_age_seconds",
            "Age of the oldest unacknowledged message (0 when empty).",
            QUEUE,
            registry=r,
        )

        self.store_full = Gauge(
            "ocd_store_full",
            "1 while the disk (or the database's quota) is full and new sends are refused.",
            registry=r,
        )

        self._commits_on = {
            True: self.group_commit.labels("loop"),
            False: self.group_commit.labels("writer"),
        }

    def committed(self, operations: int, on_loop: bool) -> None:
        self._commits_on[on_loop].observe(operations)

    async def render(self, store: MetricsStore, now_ms: int) -> bytes:
        """Refresh the per-queue gauges from the store, then the exposition text."""
        self.store_full.set(0 if store.full() is None else 1)
        stats = await store.queue_stats(now_ms)
        for gauge in (
            self.backlog,
            self.backlog_bytes,
            self.delayed,
            self.inflight,
            self.oldest_age,
        ):
            gauge.clear()
        for q in store.queues():
            labels = (q.account, q.name)
            b = await store.backlog(q)
            c = queue_counts(b.count, stats.get(q.key))
            self.backlog.labels(*labels).set(c.backlog)
            self.backlog_bytes.labels(*labels).set(b.bytes)
            self.inflight.labels(*labels).set(c.in_flight)
            self.delayed.labels(*labels).set(c.delayed)
            self.oldest_age.labels(*labels).set(
                max(0, now_ms - b.oldest_ms) / 1000 if b.oldest_ms else 0
            )
        return generate_latest(self.registry)
