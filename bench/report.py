"""The bench's report: which number of which scenario is a metric, its target, medians,
the SUMMARY line and the machine it ran on."""

from __future__ import annotations

import contextlib
import os
import platform
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import median


@dataclass(frozen=True)
class Metric:
    name: str
    scenario: str
    path: tuple[str, ...]  # where the value is in one run's result
    unit: str
    target: tuple[str, float] | None = None  # (">=" or "<=", bound)

    def values(self, runs: list[dict[str, Any]]) -> list[float]:
        out = []
        for run in runs:
            value: Any = run
            try:
                for key in self.path:
                    value = value[key]
            except KeyError:  # not measured in this run (e.g. sqs_boto3 without moto)
                continue
            out.append(float(value))
        return out

    def met(self, value: float) -> bool | None:
        if self.target is None:
            return None
        op, bound = self.target
        return value >= bound if op == ">=" else value <= bound


RSS_GROWTH_LIMIT = 1.2  # RSS with the deep backlog at most 20 % above the shallow one

METRICS = (
    Metric("js_e2e", "js_e2e", ("ocd", "msg_s"), "msg/s"),
    Metric("js_e2e_workerd_builtin", "js_e2e", ("workerd_builtin", "msg_s"), "msg/s"),
    Metric("js_e2e_miniflare", "js_e2e", ("miniflare", "msg_s"), "msg/s"),
    Metric("js_e2e_vs_workerd_builtin", "js_e2e", ("vs_workerd_builtin",), "", (">=", 2.0)),
    Metric("js_e2e_vs_miniflare", "js_e2e", ("vs_miniflare",), "", (">=", 2.0)),
    Metric("js_e2e_cpu_us", "js_e2e", ("ocd", "cpu_us_per_msg"), "us/msg"),
    Metric(
        "js_e2e_workerd_builtin_cpu_us", "js_e2e", ("workerd_builtin", "cpu_us_per_msg"), "us/msg"
    ),
    Metric("js_pg_e2e", "js_pg_e2e", ("ocd_postgres", "msg_s"), "msg/s"),
    Metric("js_pg_e2e_vs_workerd_builtin", "js_pg_e2e", ("vs_workerd_builtin",), "", (">=", 1.0)),
    Metric("js_single_send", "js_single_send", ("ocd", "send_msg_s"), "msg/s"),
    Metric(
        "js_single_send_workerd_builtin",
        "js_single_send",
        ("workerd_builtin", "send_msg_s"),
        "msg/s",
    ),
    Metric(
        "js_single_send_vs_workerd_builtin",
        "js_single_send",
        ("vs_workerd_builtin",),
        "",
        (">=", 5),
    ),
    Metric("js_latency_p50", "js_latency", ("p50_ms",), "ms"),
    Metric("js_latency_p99", "js_latency", ("p99_ms",), "ms"),
    Metric("js_latency_cpu_us", "js_latency", ("cpu_us_per_msg",), "us/msg"),
    Metric("e2e_batch", "e2e_batch", ("e2e_msg_s",), "msg/s", (">=", 20_000)),
    Metric("e2e_batch_send", "e2e_batch", ("send_msg_s",), "msg/s"),
    Metric("single_send", "single_send", ("send_msg_s",), "msg/s", (">=", 10_000)),
    Metric("single_send_e2e", "single_send", ("e2e_msg_s",), "msg/s"),
    Metric("e2e_batch_cpu", "e2e_batch", ("daemon_cpu_pct",), "%"),
    Metric("single_send_cpu", "single_send", ("daemon_cpu_pct",), "%"),
    Metric("latency_cpu", "latency", ("daemon_cpu_pct",), "%"),
    Metric("latency_p50", "latency", ("p50_ms",), "ms", ("<=", 5)),
    Metric("latency_p99", "latency", ("p99_ms",), "ms", ("<=", 20)),
    Metric("latency_max", "latency", ("max_ms",), "ms"),
    Metric("backlog_ratio", "backlog", ("rate_ratio",), "", (">=", 0.8)),
    Metric("backlog_rate_deep", "backlog", ("deep", "consume_msg_s"), "msg/s"),
    Metric("backlog_rate_shallow", "backlog", ("shallow", "consume_msg_s"), "msg/s"),
    Metric("rss_fill_deep", "backlog", ("deep", "rss_after_fill_mb"), "MB"),
    Metric("rss_fill_shallow", "backlog", ("shallow", "rss_after_fill_mb"), "MB"),
    Metric("rss_fill_ratio", "backlog", ("rss_fill_ratio",), "", ("<=", RSS_GROWTH_LIMIT)),
    Metric("rss_consume_deep", "backlog", ("deep", "rss_consuming_max_mb"), "MB"),
    Metric("rss_consume_shallow", "backlog", ("shallow", "rss_consuming_max_mb"), "MB"),
    Metric("rss_consume_ratio", "backlog", ("rss_consume_ratio",), "", ("<=", RSS_GROWTH_LIMIT)),
    Metric("fill_rate_deep", "backlog", ("deep", "fill_msg_s"), "msg/s"),
    Metric("restart_deep_s", "backlog", ("deep", "restart_s"), "s"),
    Metric("restart_shallow_s", "backlog", ("shallow", "restart_s"), "s"),
    Metric("http_push_batch", "http_push_batch", ("msg_s",), "msg/s", (">=", 30_000)),
    Metric("http_push_batch_cpu", "http_push_batch", ("daemon_cpu_pct",), "%"),
    Metric("http_push_batch_bench_cpu", "http_push_batch", ("bench_cpu_pct",), "%"),
    Metric("http_pull_ack", "http_pull_ack", ("msg_s",), "msg/s", (">=", 20_000)),
    Metric("http_pull_ack_cpu", "http_pull_ack", ("daemon_cpu_pct",), "%"),
    Metric("http_pull_ack_bench_cpu", "http_pull_ack", ("bench_cpu_pct",), "%"),
    Metric("http_push_single", "http_push_single", ("req_s",), "req/s"),
    Metric("trivial_rps", "http_push_single", ("trivial_req_s",), "req/s"),
    Metric("http_push_single_ratio", "http_push_single", ("ratio",), "", (">=", 0.7)),
    Metric("http_push_single_cpu", "http_push_single", ("ocd", "daemon_cpu_pct"), "%"),
    Metric("http_push_single_bench_cpu", "http_push_single", ("ocd", "bench_cpu_pct"), "%"),
    Metric("trivial_cpu", "http_push_single", ("trivial", "server_cpu_pct"), "%"),
    Metric("http_push_single_cpu_us", "http_push_single", ("ocd", "cpu_us_per_req"), "us"),
    Metric("trivial_cpu_us", "http_push_single", ("trivial", "cpu_us_per_req"), "us"),
    Metric("trivial_bench_cpu", "http_push_single", ("trivial", "bench_cpu_pct"), "%"),
    Metric("http_push_single_raw", "http_push_single", ("raw", "req_s"), "req/s"),
    Metric("trivial_raw_rps", "http_push_single", ("raw", "trivial_req_s"), "req/s"),
    Metric("http_push_single_raw_ratio", "http_push_single", ("raw", "ratio"), "", (">=", 0.7)),
    Metric("http_push_single_raw_cpu", "http_push_single", ("raw", "ocd", "daemon_cpu_pct"), "%"),
    Metric(
        "http_push_single_raw_bench_cpu", "http_push_single", ("raw", "ocd", "bench_cpu_pct"), "%"
    ),
    Metric("trivial_raw_cpu", "http_push_single", ("raw", "trivial", "server_cpu_pct"), "%"),
    Metric("trivial_raw_bench_cpu", "http_push_single", ("raw", "trivial", "bench_cpu_pct"), "%"),
    # The PostgreSQL store (pg_*): the same scenarios on one throw-away cluster of the run.
    Metric("pg_e2e_batch", "pg_e2e_batch", ("e2e_msg_s",), "msg/s", (">=", 15_000)),
    Metric("pg_e2e_batch_send", "pg_e2e_batch", ("send_msg_s",), "msg/s"),
    Metric("pg_e2e_batch_cpu", "pg_e2e_batch", ("daemon_cpu_pct",), "%"),
    Metric("pg_e2e_batch_pg_cpu", "pg_e2e_batch", ("pg_cpu_pct",), "%"),
    Metric("pg_single_send", "pg_single_send", ("send_msg_s",), "msg/s", (">=", 8_000)),
    Metric("pg_single_send_e2e", "pg_single_send", ("e2e_msg_s",), "msg/s"),
    Metric("pg_single_send_cpu", "pg_single_send", ("daemon_cpu_pct",), "%"),
    Metric("pg_single_send_pg_cpu", "pg_single_send", ("pg_cpu_pct",), "%"),
    Metric("pg_latency_p50", "pg_latency", ("p50_ms",), "ms", ("<=", 10)),
    Metric("pg_latency_p99", "pg_latency", ("p99_ms",), "ms", ("<=", 50)),
    Metric("pg_latency_max", "pg_latency", ("max_ms",), "ms"),
    Metric("pg_latency_cpu", "pg_latency", ("daemon_cpu_pct",), "%"),
    Metric("pg_latency_pg_cpu", "pg_latency", ("pg_cpu_pct",), "%"),
    Metric("pg_backlog_ratio", "pg_backlog", ("rate_ratio",), "", (">=", 0.8)),
    Metric("pg_backlog_rate_deep", "pg_backlog", ("deep", "consume_msg_s"), "msg/s"),
    Metric("pg_backlog_rate_shallow", "pg_backlog", ("shallow", "consume_msg_s"), "msg/s"),
    Metric("pg_rss_fill_deep", "pg_backlog", ("deep", "rss_after_fill_mb"), "MB"),
    Metric("pg_rss_fill_shallow", "pg_backlog", ("shallow", "rss_after_fill_mb"), "MB"),
    Metric("pg_rss_fill_ratio", "pg_backlog", ("rss_fill_ratio",), "", ("<=", RSS_GROWTH_LIMIT)),
    Metric("pg_rss_consume_deep", "pg_backlog", ("deep", "rss_consuming_max_mb"), "MB"),
    Metric("pg_rss_consume_shallow", "pg_backlog", ("shallow", "rss_consuming_max_mb"), "MB"),
    Metric(
        "pg_rss_consume_ratio", "pg_backlog", ("rss_consume_ratio",), "", ("<=", RSS_GROWTH_LIMIT)
    ),
    Metric("pg_fill_rate_deep", "pg_backlog", ("deep", "fill_msg_s"), "msg/s"),
    Metric("pg_db_mb_deep", "pg_backlog", ("deep", "db_mb"), "MB"),
    Metric("pg_db_mb_shallow", "pg_backlog", ("shallow", "db_mb"), "MB"),
    Metric("pg_restart_deep_s", "pg_backlog", ("deep", "restart_s"), "s"),
    Metric("pg_restart_shallow_s", "pg_backlog", ("shallow", "restart_s"), "s"),
    Metric("pg_two_nodes", "pg_two_nodes", ("e2e_msg_s",), "msg/s"),
    Metric("ui_worst_page_p50", "ui", ("worst_p50_ms",), "ms", ("<=", 50)),
    Metric("ui_worst_page_p99", "ui", ("worst_p99_ms",), "ms", ("<=", 150)),
    Metric("ui_queue_p50", "ui", ("queue", "p50_ms"), "ms"),
    Metric("ui_search_p50", "ui", ("queue_search", "p50_ms"), "ms"),
    Metric("ui_sse_tick_p99", "ui", ("tick_ms_p99",), "ms", ("<=", 5)),
    Metric("ui_send_ratio", "ui", ("send_ratio",), "", (">=", 0.97)),
    Metric("pg_two_nodes_send", "pg_two_nodes", ("send_msg_s",), "msg/s"),
    Metric("pg_two_nodes_cpu", "pg_two_nodes", ("daemon_cpu_pct",), "%"),
    Metric("pg_two_nodes_pg_cpu", "pg_two_nodes", ("pg_cpu_pct",), "%"),
    # FIFO queues: each against its peer measured in the same run
    Metric("fifo_e2e", "fifo_e2e", ("fifo", "e2e_msg_s"), "msg/s"),
    Metric("fifo_e2e_standard", "fifo_e2e", ("standard", "e2e_msg_s"), "msg/s"),
    Metric("fifo_e2e_ratio", "fifo_e2e", ("ratio",), "", (">=", 0.6)),
    Metric("fifo_hot_claims", "fifo_hot_group", ("with", "claim_msg_s"), "msg/s"),
    Metric("fifo_cold_claims", "fifo_hot_group", ("without", "claim_msg_s"), "msg/s"),
    Metric("fifo_hot_group_ratio", "fifo_hot_group", ("ratio",), "", (">=", 0.8)),
    Metric("pg_fifo_e2e", "pg_fifo_e2e", ("fifo", "e2e_msg_s"), "msg/s"),
    Metric("pg_fifo_e2e_standard", "pg_fifo_e2e", ("standard", "e2e_msg_s"), "msg/s"),
    Metric("pg_fifo_e2e_ratio", "pg_fifo_e2e", ("ratio",), "", (">=", 0.6)),
    Metric("pg_fifo_hot_claims", "pg_fifo_hot_group", ("with", "claim_msg_s"), "msg/s"),
    Metric("pg_fifo_cold_claims", "pg_fifo_hot_group", ("without", "claim_msg_s"), "msg/s"),
    Metric("pg_fifo_hot_group_ratio", "pg_fifo_hot_group", ("ratio",), "", (">=", 0.8)),
    # The store alone (store_alone.py): CPU a message over send + claim + ack, and
    # PostgreSQL's writes a message
    Metric("store_us_per_msg", "store", ("standard", "us_per_msg"), "us/msg", ("<=", 7)),
    Metric("store_fifo_us_per_msg", "store", ("fifo", "us_per_msg"), "us/msg"),
    Metric("store_fifo_ratio", "store", ("fifo_ratio",), "", ("<=", 2.5)),
    Metric("store_fifo_hashed_us_per_msg", "store", ("fifo_hashed", "us_per_msg"), "us/msg"),
    Metric("store_send_us_per_msg", "store", ("standard", "send_us_per_msg"), "us/msg"),
    Metric("store_claim_ack_us_per_msg", "store", ("standard", "claim_ack_us_per_msg"), "us/msg"),
    Metric("pg_store_us_per_msg", "pg_store", ("standard", "us_per_msg"), "us/msg"),
    Metric("pg_store_fifo_us_per_msg", "pg_store", ("fifo", "us_per_msg"), "us/msg"),
    Metric("pg_store_fifo_ratio", "pg_store", ("fifo_ratio",), ""),
    Metric("pg_store_server_us_per_msg", "pg_store", ("standard", "server_us_per_msg"), "us/msg"),
    Metric("pg_store_fifo_server_us_per_msg", "pg_store", ("fifo", "server_us_per_msg"), "us/msg"),
    Metric("pg_heap_tuples_per_msg", "pg_store", ("standard", "heap_tuples_per_msg"), ""),
    Metric(
        "pg_index_inserts_per_msg",
        "pg_store",
        ("standard", "index_inserts_per_msg"),
        "",
        ("<=", 2),
    ),
    Metric("pg_dead_tuples_per_msg", "pg_store", ("standard", "dead_tuples_per_msg"), ""),
    Metric("pg_wal_bytes_per_msg", "pg_store", ("standard", "wal_bytes_per_msg"), "B"),
    Metric("pg_fifo_index_inserts_per_msg", "pg_store", ("fifo", "index_inserts_per_msg"), ""),
    # The SQS endpoint under boto3 (sqs.py), beside moto's server in the same run
    Metric("sqs_send", "sqs_boto3", ("ocd_1000", "send_msg_s"), "msg/s"),
    Metric("sqs_receive_delete", "sqs_boto3", ("ocd_1000", "receive_delete_msg_s"), "msg/s"),
    Metric("sqs_moto_send", "sqs_boto3", ("moto", "send_msg_s"), "msg/s"),
    Metric("sqs_moto_receive_delete", "sqs_boto3", ("moto", "receive_delete_msg_s"), "msg/s"),
    Metric("sqs_send_vs_moto", "sqs_boto3", ("send_vs_moto",), "", (">=", 100)),
    Metric("sqs_receive_delete_vs_moto", "sqs_boto3", ("receive_delete_vs_moto",), "", (">=", 100)),
    Metric("sqs_send_10k_vs_1k", "sqs_boto3", ("ocd_10000", "send_vs_1000"), "", (">=", 0.8)),
    Metric(
        "sqs_receive_10k_vs_1k",
        "sqs_boto3",
        ("ocd_10000", "receive_delete_vs_1000"),
        "",
        (">=", 0.8),
    ),
    Metric("sqs_send_100k_vs_1k", "sqs_boto3", ("ocd_100000", "send_vs_1000"), "", (">=", 0.8)),
    Metric(
        "sqs_receive_100k_vs_1k",
        "sqs_boto3",
        ("ocd_100000", "receive_delete_vs_1000"),
        "",
        (">=", 0.8),
    ),
    # The SQS endpoint from the lean raw-socket generator (sqs_lean.py)
    Metric("sqs_raw_send", "sqs_raw", ("send", "msg_s"), "msg/s", (">=", 20_000)),
    Metric("sqs_raw_send_cpu", "sqs_raw", ("send", "daemon_cpu_pct"), "%"),
    Metric("sqs_raw_send_cpu_us", "sqs_raw", ("send", "cpu_us_per_msg"), "us"),
    Metric("sqs_raw_receive_delete_cpu_us", "sqs_raw", ("receive_delete", "cpu_us_per_msg"), "us"),
    Metric("sqs_raw_send_bench_cpu", "sqs_raw", ("send", "bench_cpu_pct"), "%"),
    Metric(
        "sqs_raw_receive_delete", "sqs_raw", ("receive_delete", "msg_s"), "msg/s", (">=", 10_000)
    ),
    Metric("sqs_raw_receive_delete_cpu", "sqs_raw", ("receive_delete", "daemon_cpu_pct"), "%"),
    Metric("sqs_raw_receive_delete_bench_cpu", "sqs_raw", ("receive_delete", "bench_cpu_pct"), "%"),
    Metric("sqs_idle_poll_cpu", "sqs_idle_polls", ("idle", "daemon_cpu_pct"), "%", ("<=", 2)),
    Metric("idle_cpu_pct_10k", "idle_queues", ("many", "idle_cpu_pct"), "%", ("<=", 1.0)),
    Metric("idle_cpu_pct_10", "idle_queues", ("peer", "idle_cpu_pct"), "%"),
    Metric("startup_s_10k", "idle_queues", ("many", "startup_s"), "s", ("<=", 5.0)),
    Metric("restart_s_10k", "idle_queues", ("many", "restart_s"), "s"),
    Metric("pg_idle_cpu_pct_10k", "pg_idle_queues", ("many", "idle_cpu_pct"), "%"),
    Metric("pg_idle_cpu_pct_10", "pg_idle_queues", ("peer", "idle_cpu_pct"), "%"),
    Metric("pg_startup_s_10k", "pg_idle_queues", ("many", "startup_s"), "s"),
    Metric("pg_restart_s_10k", "pg_idle_queues", ("many", "restart_s"), "s"),
    Metric("sqs_wake_p50", "sqs_idle_polls", ("wake_p50_ms",), "ms"),
    Metric("sqs_wake_p99", "sqs_idle_polls", ("wake_p99_ms",), "ms", ("<=", 20)),
    Metric("sqs_send_to_receive_p99", "sqs_idle_polls", ("send_to_receive_p99_ms",), "ms"),
)


@dataclass(frozen=True)
class Ratio:
    """One metric's median over another's, both of the same bench run (so measured through
    the same machine's drift); ``runs`` pairs the two scenarios' runs by number, for a feel
    of the spread only: the runs were not measured at the same time."""

    name: str
    numerator: str
    denominator: str
    target: tuple[str, float] | None = None

    def met(self, value: float) -> bool | None:
        if self.target is None:
            return None
        op, bound = self.target
        return value >= bound if op == ">=" else value <= bound


RATIOS = (
    Ratio("pg_two_nodes_ratio", "pg_two_nodes", "pg_e2e_batch", (">=", 0.7)),
    Ratio("pg_to_sqlite_e2e_ratio", "pg_e2e_batch", "e2e_batch"),
    Ratio("pg_to_sqlite_single_ratio", "pg_single_send", "single_send"),
    Ratio("pg_to_sqlite_latency_p50_ratio", "pg_latency_p50", "latency_p50"),
    # issue 39: a Python worker on ocd against the JS peers of js_e2e (the same load:
    # sendBatch of 100, batches of 100 acked whole)
    Ratio("py_e2e_vs_workerd_builtin", "e2e_batch", "js_e2e_workerd_builtin", (">=", 2.0)),
    Ratio("py_e2e_vs_miniflare", "e2e_batch", "js_e2e_miniflare", (">=", 2.0)),
)


def summarise(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in METRICS:
        if m.scenario not in results:
            continue
        runs = m.values(results[m.scenario])
        if not runs:
            continue
        mid = median(runs)
        out[m.name] = {
            "unit": m.unit,
            "runs": [round(v, 3) for v in runs],
            "median": round(mid, 3),
            "target": f"{m.target[0]} {m.target[1]}" if m.target else None,
            "pass": m.met(mid),
        }
    for r in RATIOS:
        top, bottom = out.get(r.numerator), out.get(r.denominator)
        if top is None or bottom is None or not bottom["median"]:
            continue
        value = top["median"] / bottom["median"]
        out[r.name] = {
            "unit": "",
            "of": f"median {r.numerator} / median {r.denominator}",
            "runs": [
                round(a / b, 3) for a, b in zip(top["runs"], bottom["runs"], strict=False) if b
            ],
            "median": round(value, 3),
            "target": f"{r.target[0]} {r.target[1]}" if r.target else None,
            "pass": r.met(value),
        }
    return out


def summary_line(metrics: dict[str, Any], skipped: dict[str, str] | None = None) -> str:
    def show(name: str, label: str, fmt: str, unit: str = "") -> str:
        m = metrics.get(name)
        if m is None:
            return f"{label}=n/a"
        mark = {True: " [PASS]", False: " [FAIL]", None: ""}[m["pass"]]
        return f"{label}={m['median']:{fmt}}{unit}{mark}"

    parts = [
        show("js_e2e", "js_e2e", ".0f", " msg/s"),
        show("js_e2e_vs_workerd_builtin", "js_vs_workerd_builtin", ".2f"),
        show("js_e2e_vs_miniflare", "js_vs_miniflare", ".2f"),
        show("js_pg_e2e_vs_workerd_builtin", "js_pg_vs_workerd_builtin", ".2f"),
        show("js_single_send_vs_workerd_builtin", "js_single_vs_workerd_builtin", ".1f"),
        show("py_e2e_vs_workerd_builtin", "py_vs_workerd_builtin", ".2f"),
        show("py_e2e_vs_miniflare", "py_vs_miniflare", ".2f"),
        "js_latency " + show("js_latency_p50", "p50", ".0f", " ms"),
        show("js_latency_p99", "p99", ".0f", " ms"),
        show("e2e_batch", "e2e_batch", ".0f", " msg/s"),
        show("single_send", "single_send", ".0f", " msg/s"),
        "latency " + show("latency_p50", "p50", ".1f", " ms"),
        show("latency_p99", "p99", ".1f", " ms"),
        show("backlog_ratio", "backlog_ratio", ".2f"),
        show("rss_fill_deep", "rss_deep", ".0f", "MB"),
        show("rss_fill_shallow", "rss_shallow", ".0f", "MB"),
        show("rss_fill_ratio", "rss_ratio", ".2f"),
        show("http_push_batch", "http_batch", ".0f", " msg/s"),
        show("http_pull_ack", "http_pull_ack", ".0f", " msg/s"),
        show("http_push_single", "http_single", ".0f", " req/s"),
        show("trivial_rps", "trivial", ".0f", " req/s"),
        show("http_push_single_ratio", "http_single_ratio", ".2f"),
        show("http_push_single_raw", "http_single_raw", ".0f", " req/s"),
        show("trivial_raw_rps", "trivial_raw", ".0f", " req/s"),
        show("http_push_single_raw_ratio", "http_single_raw_ratio", ".2f"),
        show("pg_e2e_batch", "pg_e2e_batch", ".0f", " msg/s"),
        show("pg_single_send", "pg_single_send", ".0f", " msg/s"),
        "pg_latency " + show("pg_latency_p50", "p50", ".1f", " ms"),
        show("pg_latency_p99", "p99", ".1f", " ms"),
        show("pg_backlog_ratio", "pg_backlog_ratio", ".2f"),
        show("pg_rss_fill_ratio", "pg_rss_ratio", ".2f"),
        show("pg_rss_consume_ratio", "pg_rss_consume_ratio", ".2f"),
        show("pg_two_nodes", "pg_two_nodes", ".0f", " msg/s"),
        show("pg_two_nodes_ratio", "pg_two_nodes_ratio", ".2f"),
        show("pg_to_sqlite_e2e_ratio", "pg_to_sqlite_e2e", ".2f"),
        show("pg_to_sqlite_single_ratio", "pg_to_sqlite_single", ".2f"),
        show("fifo_e2e", "fifo_e2e", ".0f", " msg/s"),
        show("fifo_e2e_ratio", "fifo_e2e_ratio", ".2f"),
        show("fifo_hot_group_ratio", "fifo_hot_group_ratio", ".2f"),
        show("pg_fifo_e2e", "pg_fifo_e2e", ".0f", " msg/s"),
        show("pg_fifo_e2e_ratio", "pg_fifo_e2e_ratio", ".2f"),
        show("pg_fifo_hot_group_ratio", "pg_fifo_hot_group_ratio", ".2f"),
        show("store_us_per_msg", "store", ".1f", " us/msg"),
        show("store_fifo_ratio", "store_fifo_ratio", ".2f"),
        show("pg_store_us_per_msg", "pg_store", ".1f", " us/msg"),
        show("pg_store_server_us_per_msg", "pg_store_server", ".1f", " us/msg"),
        show("pg_index_inserts_per_msg", "pg_index_inserts", ".2f", "/msg"),
        show("ui_worst_page_p50", "ui_page_p50", ".1f", " ms"),
        show("ui_worst_page_p99", "ui_page_p99", ".1f", " ms"),
        show("ui_sse_tick_p99", "ui_sse_tick_p99", ".2f", " ms"),
        show("ui_send_ratio", "ui_send_ratio", ".3f"),
        show("sqs_send", "sqs_boto3_send", ".0f", " msg/s"),
        show("sqs_receive_delete", "sqs_boto3_receive_delete", ".0f", " msg/s"),
        show("sqs_send_vs_moto", "sqs_vs_moto_send", ".0f", "x"),
        show("sqs_receive_delete_vs_moto", "sqs_vs_moto_receive", ".0f", "x"),
        show("sqs_raw_send", "sqs_raw_send", ".0f", " msg/s"),
        show("sqs_raw_receive_delete", "sqs_raw_receive_delete", ".0f", " msg/s"),
        show("sqs_idle_poll_cpu", "sqs_idle_poll_cpu", ".2f", "%"),
        show("idle_cpu_pct_10k", "idle_cpu_pct_10k", ".2f", "%"),
        show("startup_s_10k", "startup_s_10k", ".1f", " s"),
        show("sqs_wake_p99", "sqs_wake_p99", ".1f", " ms"),
    ]
    by_reason: dict[str, list[str]] = {}
    for name, reason in (skipped or {}).items():
        by_reason.setdefault(reason, []).append(name)
    for reason, names in by_reason.items():
        parts.append(f"skipped {','.join(names)} ({reason})")
    return "SUMMARY " + " ".join(parts)


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        # Other work on this machine makes the numbers noisy: the load before the bench.
        "loadavg_before": os.getloadavg(),
    }
