"""What Python Workers code imports besides ``workers``: pyodide.ffi, pyodide.http, js, and
bodies with to_py(); none of it shadows a real installed package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ocd.loader import install_workers_alias
from runtime.values import JsBytes, JsDict, JsList, JsStr, as_js_value

install_workers_alias()

import js  # noqa: E402
from pyodide.ffi import JsException, JsProxy, create_proxy, to_js, to_py  # noqa: E402


@pytest.mark.parametrize(
    ("value", "base"),
    [({"a": [1, {"b": 2}]}, dict), ([1, "x"], list), ("text", str), (b"\x00raw", bytes)],
)
def test_a_body_has_to_py_and_is_still_equal_to_and_an_instance_of_its_value(value, base):
    body = as_js_value(value)
    assert body.to_py() is body
    assert body == value and isinstance(body, base)
    assert json.dumps(body if base is not bytes else None) == json.dumps(
        value if base is not bytes else None
    )
    assert repr(body) == repr(value)


def test_nested_bodies_convert_and_shared_references_stay_shared():
    shared = {"k": 1}
    cyclic: list = [shared, shared]
    cyclic.append(cyclic)
    body = as_js_value(cyclic)
    assert isinstance(body, JsList) and body[0] is body[1] and body[2] is body
    assert body[0].to_py() == {"k": 1} and body[0].k == 1
    assert isinstance(as_js_value({"s": "x"})["s"], str)
    mixed = as_js_value({"n": 1, "f": 0.5, "t": True, "z": None, "s": ["x", b"y", [2]]})
    assert isinstance(mixed["s"][0], JsStr) and isinstance(mixed["s"][1], JsBytes)
    assert isinstance(mixed["s"][2], JsList) and mixed["s"][2].to_py() == [2]
    assert mixed == {"n": 1, "f": 0.5, "t": True, "z": None, "s": ["x", b"y", [2]]}


def test_to_js_hands_values_through_as_they_would_come_back():
    assert to_js({"a": {"b": [1, 2]}}) == {"a": {"b": [1, 2]}}
    converted = to_js({"a": {"b": 1}}, dict_converter=js.Object.fromEntries)
    assert converted == {"a": {"b": 1}} and isinstance(converted["a"], JsDict)
    data = to_js(b"png")
    assert isinstance(data, JsBytes) and data.buffer == b"png"
    assert to_py(as_js_value([1])) == [1] and to_py(5) == 5
    assert issubclass(JsException, Exception) and isinstance(JsProxy, type)
    proxy = create_proxy(lambda x: x + 1)
    assert proxy(1) == 2
    proxy.destroy()


def test_the_js_module_offers_what_the_examples_use(capsys):
    assert js.JSON.parse(js.JSON.stringify({"a": [1, None]})) == {"a": [1, None]}
    assert js.JSON.stringify({"a": 1}) == '{"a":1}'
    js.console.log("hello", 1)
    assert capsys.readouterr().out == "hello 1\n"
    r = js.Response.new("hi", {"status": 201, "headers": {"x-a": "b"}})
    assert (r.status, r.body, r.headers["x-a"]) == (201, b"hi", "b")
    url = js.URL.new("https://a.example:8443/p/q?x=1&x=2#h")
    assert (url.hostname, url.port, url.pathname, url.search, url.hash) == (
        "a.example", "8443", "/p/q", "?x=1&x=2", "#h"
    )  # fmt: skip
    assert url.searchParams.getAll("x") == ["1", "2"] and url.searchParams.get("y") is None
    h = js.Headers.new({"Content-Type": "a"})
    assert h.get("content-type") == "a" and h.has("CONTENT-TYPE")
    assert js.Object.keys({"a": 1}) == ["a"] and isinstance(JsStr("x"), str)


def test_a_js_name_ocd_does_not_provide_imports_and_raises_when_used():
    from js import HTMLRewriter

    with pytest.raises(NotImplementedError, match=r"js\.HTMLRewriter is not supported by ocd"):
        HTMLRewriter.new()


def test_workers_exports_the_names_cloudflares_examples_import():
    import workers

    for name in (
        "DurableObject",
        "WorkflowEntrypoint",
        "handler",
        "fetch",
        "python_to_rpc",
        "python_from_rpc",
        "import_from_javascript",
        "wsgi",
        "asgi",
        "env",
        "wait_until",
        "waitUntil",
        "Response",
        "Request",
        "WorkerEntrypoint",
    ):
        assert hasattr(workers, name), name  # fmt: skip
    with pytest.raises(NotImplementedError, match="import_from_javascript"):
        workers.import_from_javascript("cloudflare:sockets")
    with pytest.raises(RuntimeError, match="inside a handler"):
        workers.env.ANYTHING  # noqa: B018


def test_a_real_installed_pyodide_or_js_package_wins_over_ocds(tmp_path: Path):
    for name in ("pyodide", "js"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("REAL = True\n")
    code = (
        "from ocd.loader import install_workers_alias; install_workers_alias()\n"
        "import pyodide, js; print(pyodide.REAL, js.REAL)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert r.stdout.strip() == "True True", r.stderr
    assert "a package named 'pyodide' is installed" in r.stderr
