"""Stack traces of a bundled JS worker told in its sources, and workerd's own output lines
attributed to the worker without workerd's prefixes."""

from __future__ import annotations

import json
from pathlib import Path

from ocd.js.sourcemap import SourceMap, map_stack
from ocd.js.workerd import attribute

# esbuild 0.28.2's map of src/index.ts importing src/helper.ts, bundled into out/index.js:
#   // src/helper.ts            <- line 1
#   function helper(q) {
#     const x = 1;
#     throw new RangeError(`bad ${q} ${x}`);     <- line 4, column 9: helper.ts 5:9
#   }
#   ...
#       helper(batch.queue);                     <- line 10, column 5: index.ts 5:5
MAP = {
    "version": 3,
    "sources": ["../src/helper.ts", "../src/index.ts"],
    "mappings": (
        ";AAEO,SAAS,OAAO,GAAkB;AACvC,QAAM,IAAY;AAClB,QAAM,IAAI,WAAW,OAAO,CAAC,IAAI,CAAC,EAAE;"
        "AACtC;;;ACHA,IAAO,gBAAQ;AAAA,EACb,MAAM,MAAM,OAAY;AACtB,WAAO,MAAM,KAAK;AAAA,EACpB;AACF;"
    ),
    "names": [],
}


def load(tmp_path: Path) -> SourceMap:
    out = tmp_path / "app" / "out"
    out.mkdir(parents=True)
    (out / "index.js.map").write_text(json.dumps(MAP))
    found = SourceMap.load(out / "index.js.map", tmp_path / "app")
    assert found is not None
    return found


def test_frames_of_the_bundle_are_told_in_the_users_files(tmp_path):
    stack = (
        "RangeError: bad q 1\n"
        "    at helper (index.js:4:9)\n"
        "    at Object.queue (index.js:10:5)\n"
        "    at Object.queue (ocd-entry.js:40:22)\n"
        "    at async Promise.all (index 0)"
    )
    mapped = map_stack(stack, {"index.js": load(tmp_path)}, frozenset({"ocd-entry.js"}))
    assert mapped.splitlines() == [
        "RangeError: bad q 1",
        "    at helper (src/helper.ts:5:9)",
        "    at Object.queue (src/index.ts:5:5)",
        "    at async Promise.all (index 0)",
    ]


def test_a_source_outside_the_config_directory_is_shown_whole(tmp_path):
    source_map = SourceMap(MAP, tmp_path / "elsewhere" / "out", tmp_path / "app")
    pos = source_map.lookup(4, 9)
    assert pos is not None and pos.source == str(tmp_path / "elsewhere" / "src" / "helper.ts")


def test_positions_the_map_does_not_cover_are_left_as_they_are(tmp_path):
    source_map = load(tmp_path)
    assert source_map.lookup(999, 1) is None
    assert map_stack("    at f (index.js:999:1)", {"index.js": source_map}, frozenset()) == (
        "    at f (index.js:999:1)"
    )
    assert SourceMap.load(tmp_path / "missing.map") is None


def test_workerds_uncaught_exception_line_loses_its_prefixes():
    line = (
        "workerd/server/server/listen/mod.rs:393: error: Uncaught exception: "
        "workerd/jsg/value.h:1456: failed: remote.jsg.TypeError: boom in fetch"
    )
    assert attribute(line, "app") == ("app", "TypeError: boom in fetch")
    # with several JS workers the line names none of them: it stays workerd's
    assert attribute(line, None) == ("workerd", "TypeError: boom in fetch")


def test_console_lines_stay_tagged_with_their_worker():
    assert attribute("stdout: [ocd:app] hello", None) == ("app", "hello")
    assert attribute("service w_app: Uncaught SyntaxError: x", None)[0] == "app"
