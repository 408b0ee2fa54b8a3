"""A ``cf.config.ts`` (``.js``, ``.mjs``) project file, read into the shape of a wrangler file.

The file is evaluated once (``ocd.js.evaluate``: esbuild, then node) into the object its
``defineConfig`` returned; its ``worker`` is turned into the keys a wrangler file has
(``entrypoint`` -> ``main``, ``env`` -> ``vars`` and ``queues.producers``,
``triggers.queues`` -> ``queues.consumers`` with wrangler's snake_case keys), so the loader
checks it exactly as it checks wrangler files. Every wrangler key path made here remembers
the cf.config key path it came from, and problems are reported at that one
(``worker.triggers.queues[0].maxBatchSize``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ocd.config.file import File, Table, absolute_path, read_secret_file
from ocd.config.model import JS_EXTENSIONS, JsConfig
from ocd.errors import Problem

NAMES = ("cf.config.ts", "cf.config.js", "cf.config.mts", "cf.config.mjs")
MARK = "__ocd_binding"  # set by ocd/js/cf_config.mjs on what bindings.* return
# workerd's own date when the file gives none: the pinned workerd supports it, and a
# project that cares about a date sets compatibilityDate.
DEFAULT_COMPATIBILITY_DATE = "2026-11-01"

_WORKER_KEYS = (
    "name", "entrypoint", "env", "triggers", "compatibilityDate", "compatibilityFlags",
)  # fmt: skip
_TRIGGER_KEYS = ("queues", "crons")
# A consumer's cf.config key, and wrangler's key for it.
_CONSUMER_KEYS = {
    "queue": "queue",
    "maxBatchSize": "max_batch_size",
    "maxBatchTimeout": "max_batch_timeout",
    "maxRetries": "max_retries",
    "retryDelay": "retry_delay",
    "deadLetterQueue": "dead_letter_queue",
    "maxConcurrency": "max_concurrency",
}
_PROVIDED = "ocd provides bindings.queue, bindings.var and bindings.secret"


def is_cf_config(path: str | Path) -> bool:
    return Path(path).name in NAMES


class CfConfigFile(File):
    """A cf.config file whose problems are reported at the key path the user wrote."""

    def __init__(self, shown: Path, path: Path, problems: list[Problem]) -> None:
        super().__init__(shown, path, problems, wrangler=True)
        self.origins: dict[str, str] = {}  # wrangler-shaped key path -> cf.config key path

    def problem(self, key_path: str, message: str) -> None:
        super().problem(self._origin(key_path), message)

    def _origin(self, key_path: str) -> str:
        probe = key_path
        while probe:
            if probe in self.origins:
                return self.origins[probe] + key_path[len(probe) :]
            probe = probe[: max(probe.rfind("."), probe.rfind("["), 0)]
        return key_path


def read(
    shown: Path, path: Path, problems: list[Problem], js: JsConfig, environ: Mapping[str, str]
) -> Table | None:
    """The project file at ``path``, evaluated, as a wrangler-shaped table; None (with the
    problems recorded) when it cannot be evaluated or is not a config object."""
    from ocd.js import toolchain  # config -> js only to run the file, never the other way
    from ocd.js.evaluate import EvaluateError, evaluate

    file = CfConfigFile(shown, path, problems)
    try:
        esbuild = toolchain.find("esbuild", js.esbuild, path.parent, environ)
        node = toolchain.find("node", js.node, path.parent, environ)
        value = evaluate(path, esbuild, node)
    except toolchain.ToolMissing as e:
        file.problem("", str(e))
        return None
    except EvaluateError as e:
        file.problem("", "evaluating the file failed:\n      " + "\n      ".join(e.lines))
        return None
    data = _Converter(file, environ).convert(value)
    return None if data is None else Table(file, data, "")


class _Converter:
    def __init__(self, file: CfConfigFile, environ: Mapping[str, str]) -> None:
        self.file = file
        self.environ = environ

    def convert(self, value: object) -> dict[str, Any] | None:
        top = self.file.table(value, "", ("worker",), required=("worker",))
        if top is None or "worker" not in top:
            return None
        w = self.file.table(top.get("worker"), "worker", _WORKER_KEYS, required=("entrypoint",))
        if w is None:
            return None
        out: dict[str, Any] = {}
        self._copy(w, "name", out, "name")
        entrypoint = w.get("entrypoint")
        if isinstance(entrypoint, str) and entrypoint.endswith(JS_EXTENSIONS):
            self._copy(w, "entrypoint", out, "main")
        elif "entrypoint" in w:
            what = "a path to a .js, .mjs, .ts, .mts, .jsx or .tsx file"
            w.expected("entrypoint", what, entrypoint)
        self._copy(w, "compatibilityFlags", out, "compatibility_flags")
        if "compatibilityDate" in w:
            self._copy(w, "compatibilityDate", out, "compatibility_date")
        else:
            out["compatibility_date"] = DEFAULT_COMPATIBILITY_DATE
        if "env" in w:
            self._env(w, out)
        if "triggers" in w:
            self._triggers(w, out)
        return out

    def _copy(self, src: Table, key: str, out: dict[str, Any], as_key: str, at: str = "") -> None:
        if key in src:
            out[as_key] = src.get(key)
            self.file.origins[f"{at}{as_key}"] = src.key_path(key)

    def _env(self, w: Table, out: dict[str, Any]) -> None:
        env = w.table("env", allowed=None)
        if env is None:
            return
        vars_: dict[str, Any] = {}
        producers: list[dict[str, Any]] = []
        for name, value in env.data.items():
            kp = env.key_path(name)
            kind = value.get(MARK) if isinstance(value, dict) else None
            if kind is None:  # a plain value is a var, as bindings.var(value) is
                vars_[name] = value
            elif kind == "var":
                vars_[name] = value.get("value")
            elif kind == "secret":
                secret = self._secret(kp, value)
                if secret is None:
                    continue
                vars_[name] = secret
            elif kind == "queue":
                options = {k: v for k, v in value.items() if k != MARK}
                q = self.file.table(options, kp, ("name",), required=("name",))
                if q is None or "name" not in q:
                    continue
                at = f"queues.producers[{len(producers)}]"
                self.file.origins[at] = kp
                self.file.origins[f"{at}.binding"] = kp
                self.file.origins[f"{at}.queue"] = q.key_path("name")
                producers.append({"binding": name, "queue": q.get("name")})
                continue
            else:
                self.file.problem(kp, f"bindings.{kind}(...) is not supported ({_PROVIDED})")
                continue
            self.file.origins[Table(self.file, {}, "vars").key_path(name)] = kp
        out["vars"] = vars_
        self.file.origins["vars"] = env.path
        out.setdefault("queues", {})["producers"] = producers

    def _secret(self, kp: str, value: dict[str, Any]) -> str | None:
        """bindings.secret("NAME") or ({env: "NAME"}): from ocd's environment;
        bindings.secret({file: "path"}): from a file only its owner can read."""
        source = {k: v for k, v in value.items() if k != MARK}
        s = self.file.table(source, kp, ("env", "file"))
        if s is None:
            return None
        if ("env" in s) == ("file" in s):
            self.file.problem(kp, 'expected bindings.secret("ENV_NAME") or ({ file: "path" })')
            return None
        if "env" in s:
            name = s.text("env", bool, "an environment variable name")
            if name is None:
                return None
            secret = self.environ.get(name, "")
            if not secret:
                unset = "empty" if name in self.environ else "not set"
                self.file.problem(kp, f'environment variable "{name}" is {unset}')
                return None
            return secret
        path = s.text("file", bool, "a file path")
        if path is None:
            return None
        try:
            return read_secret_file(absolute_path(self.file.path.parent, path))
        except ValueError as e:
            s.problem("file", str(e))
            return None

    def _triggers(self, w: Table, out: dict[str, Any]) -> None:
        t = w.table("triggers", _TRIGGER_KEYS)
        if t is None:
            return
        consumers: list[dict[str, Any]] = []
        for kp, item in t.items("queues"):
            c = self.file.table(item, kp, _CONSUMER_KEYS)
            if c is None:
                continue
            at = f"queues.consumers[{len(consumers)}]"
            self.file.origins[at] = kp
            consumer: dict[str, Any] = {}
            for key, as_key in _CONSUMER_KEYS.items():
                self._copy(c, key, consumer, as_key, at=f"{at}.")
            consumers.append(consumer)
        out.setdefault("queues", {})["consumers"] = consumers
        if "crons" in t:
            out["triggers"] = {"crons": t.get("crons")}
            self.file.origins["triggers"] = t.path
            self.file.origins["triggers.crons"] = t.key_path("crons")
