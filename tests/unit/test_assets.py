"""How a request path maps to a static file under each of wrangler's html_handling modes."""

from __future__ import annotations

import pytest

from ocd.config.bindings import AssetsConfig
from ocd.http.assets import Assets, Found


@pytest.fixture
def site(tmp_path):
    for name in ("index.html", "about.html", "blog/index.html", "app.js", "404.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)

    def make(**options) -> Assets:
        return Assets(AssetsConfig(tmp_path, **options))

    return make


def shown(found: Found | None) -> str | None:
    if found is None:
        return None
    if found.location is not None:
        return f"{found.status} {found.location}"
    assert found.file is not None
    return f"{found.status} {found.file.name if found.file.parent.name != 'blog' else 'blog/'}"


CASES = {
    # path: (auto-trailing-slash, force-trailing-slash, drop-trailing-slash, none)
    "/": ("200 index.html", "200 index.html", "200 index.html", None),
    "/about": ("200 about.html", "307 /about/", "200 about.html", None),
    "/about/": ("307 /about", "200 about.html", "307 /about", None),
    "/about.html": ("307 /about", "307 /about/", "307 /about", "200 about.html"),
    "/blog": ("307 /blog/", "307 /blog/", "200 blog/", None),
    "/blog/": ("200 blog/", "200 blog/", "307 /blog", None),
    "/blog/index.html": ("307 /blog/", "307 /blog/", "307 /blog", "200 blog/"),
    "/app.js": ("200 app.js",) * 4,
    "/nope": (None,) * 4,
}
MODES = ("auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none")


@pytest.mark.parametrize("path", CASES)
@pytest.mark.parametrize("mode", MODES)
def test_html_handling_maps_paths_as_wrangler_does(site, path, mode):
    assert shown(site(html_handling=mode).resolve(path)) == CASES[path][MODES.index(mode)]


def test_not_found_handling_serves_the_nearest_404_page_or_the_spa_index(site):
    assert shown(site(not_found_handling="404-page").not_found("/blog/x/y")) == "404 404.html"
    assert shown(site(not_found_handling="single-page-application").not_found("/x")) == (
        "200 index.html"
    )
    assert site().not_found("/x") == Found(404)


def test_paths_outside_the_directory_are_never_files(site, tmp_path):
    (tmp_path.parent / "secret.txt").write_text("no")
    assert site(html_handling="none").resolve("/../secret.txt") is None
    assert site(html_handling="none").resolve("/%2e%2e/secret.txt") is None


def test_run_worker_first_patterns_with_exclusions(site):
    assets = site(run_worker_first=("/api/*", "!/api/docs/*"))
    assert assets.worker_first("/api/users") and not assets.worker_first("/api/docs/x")
    assert not assets.worker_first("/about")
    assert site(run_worker_first=True).worker_first("/anything")
