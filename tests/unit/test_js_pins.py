"""The JS toolchain versions ocd names (its install hint, check-config's messages) are the
ones the tests, the example and the bench install."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocd.js.toolchain import ESBUILD_VERSION, WORKERD_VERSION

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "package", ["tests/package.json", "examples/js-app/package.json", "bench/js/package.json"]
)
def test_every_package_json_pins_the_toolchain_ocd_names(package: str) -> None:
    deps = json.loads((REPO / package).read_text())["devDependencies"]
    assert deps["workerd"] == WORKERD_VERSION
    assert deps["esbuild"] == ESBUILD_VERSION
