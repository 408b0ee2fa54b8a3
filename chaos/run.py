"""ocd's chaos suite: real ``ocd serve`` processes put through faults, each checked for
lost messages and for how the daemon recovered.

    .venv/bin/python chaos/run.py [--quick] [--only NAME,NAME]

Each scenario is a module in this package with ``async def run(quick: bool) -> dict``. The
dict it returns holds at least:

* ``lost``       -- acknowledged sends that were not delivered (or not found) afterwards;
* ``recovered``  -- one sentence: how the daemon came through (or refused, with what advice);
* ``ok``         -- whether the scenario's own expectations held (0 lost among them);

plus whatever figures the scenario measures (cycles, duplicates, durations). A scenario
that cannot run on this machine (e.g. no permission to mount a small filesystem) returns
``{"skipped": "<why>"}`` and is reported as skipped, with the reason, not as passed.

``--quick`` runs each in seconds; ``make test`` runs those quick versions
(``tests/chaos``). Writes ``chaos/results/latest.json``, prints it, then one ``SUMMARY``
line. Exits 1 when any scenario lost a message, failed its expectations or crashed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).resolve().parent / "results"

# name -> module in this package (its ``run``), or "module:function" for another entry point.
SCENARIOS: dict[str, str] = {
    "kill9": "kill9",
    "kill9_pg_two_nodes": "kill9:run_pg",
    "hostile": "hostile",  # half-open floods at a low descriptor limit, gzip bombs
    "clock_steps": "clock_steps",
    "full_disk": "full_disk",
    "damaged_files": "damaged_files",
    "pg_outage": "pg_outage",
}


async def run_one(name: str, quick: bool) -> dict[str, Any]:
    module_name, _, function = SCENARIOS[name].partition(":")
    entry = getattr(importlib.import_module(f"chaos.{module_name}"), function or "run")
    started = time.monotonic()
    try:
        result: dict[str, Any] = await entry(quick)
    except Exception as e:
        result = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def verdict(result: dict[str, Any]) -> str:
    if "skipped" in result:
        return "SKIP"
    if result.get("ok") and result.get("lost", 1) == 0:
        return "ok"
    return "FAIL"


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds per scenario, not minutes")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        print(f"chaos: {name} ...", file=sys.stderr, flush=True)
        results[name] = await run_one(name, args.quick)
        print(f"chaos: {name}: {verdict(results[name])} {results[name]}", file=sys.stderr)
    RESULTS.mkdir(exist_ok=True)
    report = {
        "quick": args.quick,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "scenarios": results,
    }
    (RESULTS / ("quick.json" if args.quick else "latest.json")).write_text(
        json.dumps(report, indent=2) + "\n"
    )
    print(json.dumps(report, indent=2))
    parts = []
    for name, r in results.items():
        v = verdict(r)
        detail = f"lost {r['lost']}" if "lost" in r else r.get("skipped") or r.get("error", "")
        parts.append(f"{name} {v} ({detail})")
    print("SUMMARY " + "; ".join(parts))
    return 0 if all(verdict(r) != "FAIL" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
