"""Where a message's CPU goes in the daemon, by stage, from a ``--profile`` run's cProfile.

    .venv/bin/python bench/run.py --only e2e_batch --runs 1 --profile
    .venv/bin/python bench/stages.py bench/results/profile-e2e_batch-1.prof 200000
    .venv/bin/python bench/run.py --only js_e2e --runs 1 --profile
    .venv/bin/python bench/stages.py bench/results/profile-js_e2e-1.prof 52000

Each function's own time (cProfile's ``tottime``, the event-loop thread only) is put in the
stage its file belongs to, then divided by the messages the run carried (a profile covers
the daemon's whole life: ``js_e2e``'s 50,000 messages and its 2,000 of warm-up). Time spent
waiting (``epoll``, inside uvloop's run, or on a child process at a JS start) is not CPU and
is left out of the total. Prints a JSON object of µs per message by stage, then one
``SUMMARY`` line.
"""

from __future__ import annotations

import json
import pstats
import sys
from pathlib import Path
from typing import Any

WAITING = "the event loop's run: waiting, mostly (not counted)"
# (stage, substrings of a function's file), first match wins. A C function (sqlite3's
# execute, json's encoder, ...) counts in the stage of the Python code that called it, and
# so does a standard-library helper of _HELPERS (base64 decodes the JS path's bodies, and
# SQS's, and the REST API's).
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("store: group commits (BEGIN, COMMIT, fsync)", ("ocd/store/sqlite/writer.py",)),
    ("store: statements and their Python", ("ocd/store/",)),
    ("send: binding, producer, codec", ("runtime/queue.py", "ocd/producer.py", "ocd/codec.py")),
    (
        "consume: decode, MessageBatch, handler call, decide",
        ("ocd/pipeline.py", "ocd/python_handler.py", "ocd/decide.py", "runtime/"),
    ),
    ("dispatch", ("ocd/dispatch.py",)),
    ("metrics and logging", ("ocd/metrics.py", "prometheus_client", "/logging/")),
    ("JSON", ("/json/",)),
    ("the bench worker's own code", ("bench/apps/",)),
    # The JS path: workerd posts sends to the producer socket, batches go to the bridge.
    ("JS send: the producer protocol (/batch, /message)", ("ocd/js/producer.py",)),
    (
        "JS deliveries: the bridge to queue(), its results as acks",
        ("ocd/js/invoke.py", "ocd/js/reports.py"),
    ),
    ("JS routes: requests passed on to workerd", ("ocd/js/proxy.py",)),
    ("JS start: bundling, workerd's config, process and logs", ("ocd/js/",)),
    ("asyncio, aiohttp and the rest", ("",)),
)
_WAITS = (
    "poll' of 'select.epoll",
    "method 'select'",
    "'control' of 'select.kqueue",
    "'poll' of 'select.poll'",  # subprocess.run waiting for esbuild or workerd at a start
    "method time.sleep",
)
_HELPERS = ("/base64.py",)


def _stage(file: str) -> str:
    for stage, marks in STAGES:
        if any(m in file for m in marks):
            return stage
    raise AssertionError("the last stage takes everything")


def _by_callers(
    stats: dict[Any, Any], callers: dict[Any, Any], seen: tuple[Any, ...] = ()
) -> dict[str, float]:
    """Shares of a function's time by its callers' stages, as cProfile split its calls; a
    helper's share goes on up to its own callers."""
    split = sum(c[2] for c in callers.values()) or 1.0
    out: dict[str, float] = {}
    for key, c in callers.items():
        if key[0].endswith(_HELPERS) and key in stats and key not in seen and stats[key][4]:
            parts = _by_callers(stats, stats[key][4], (*seen, key))
        else:
            parts = {_stage(key[0]): 1.0}
        for stage, share in parts.items():
            out[stage] = out.get(stage, 0.0) + share * c[2] / split
    return out


def by_stage(profile: Path, messages: int) -> dict[str, float]:
    """µs per message by stage, the largest first, then the total CPU."""
    stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}

    def add(stage: str, seconds: float) -> None:
        totals[stage] = totals.get(stage, 0.0) + seconds

    for (file, _line, name), (_cc, _nc, tottime, _ct, callers) in stats.items():
        if file.endswith("asyncio/runners.py") and name == "run":
            add(WAITING, tottime)  # uvloop waits inside the call that runs the loop
        elif file == "~" and any(w in name for w in _WAITS):
            add(WAITING, tottime)
        elif (file != "~" and not file.endswith(_HELPERS)) or not callers:
            add(_stage(file), tottime)
        else:  # a C function or a helper: its time goes to its callers' stages
            for stage, share in _by_callers(stats, callers).items():
                add(stage, tottime * share)
    out = {
        k: round(v / messages * 1e6, 2) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])
    }
    out["total CPU"] = round(sum(v for k, v in out.items() if k != WAITING), 2)
    return out


def main() -> None:
    profile, messages = Path(sys.argv[1]), int(sys.argv[2])
    out = by_stage(profile, messages)
    print(json.dumps(out, indent=2))
    parts = [f"{k}={v}" for k, v in out.items() if k != WAITING]
    print("SUMMARY µs/msg " + " | ".join(parts))


if __name__ == "__main__":
    main()
