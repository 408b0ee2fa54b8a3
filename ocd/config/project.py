"""Which file is the project: ``ocd.toml``, or a Worker project's own wrangler file, so
that ``ocd dev`` runs in the folder of an ``npm create cloudflare`` project as ``wrangler
dev`` does. One list, ``PROJECT_FILES``, maps each file name to the loader that reads it,
in the order they are looked for in the current folder; a new kind of project file is one
more entry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ocd.config import cf_config
from ocd.config.loader import load_cf_config, load_ocd_toml, load_wrangler_project
from ocd.config.model import Config

Loader = Callable[[Path, Mapping[str, str] | None, int | None], Config]

PROJECT_FILES: tuple[tuple[str, Loader], ...] = (
    ("ocd.toml", load_ocd_toml),
    *((name, load_cf_config) for name in cf_config.NAMES),
    ("wrangler.jsonc", load_wrangler_project),
    ("wrangler.json", load_wrangler_project),
    ("wrangler.toml", load_wrangler_project),
)
DEFAULT_FILE = PROJECT_FILES[0][0]


def find_project(directory: Path) -> Path | None:
    """The first of ``PROJECT_FILES`` present in ``directory`` (as a relative path when
    ``directory`` is the current one, as the user would name it)."""
    for name, _ in PROJECT_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def loader_for(path: Path) -> Loader:
    """The loader of a file named on the command line: by its name, any other ``.json`` or
    ``.jsonc`` file is a wrangler file (ocd's own config is TOML), the rest ocd's TOML."""
    for name, loader in PROJECT_FILES:
        if path.name == name:
            return loader
    if path.suffix in (".json", ".jsonc"):
        return load_wrangler_project
    return load_ocd_toml


def load_config(
    path: str | Path, environ: Mapping[str, str] | None = None, port: int | None = None
) -> Config:
    """Read and validate the project file at ``path`` (ocd's TOML or a wrangler file);
    ConfigError lists every problem. ``port`` (``--port``) replaces the listen port."""
    path = Path(path)
    return loader_for(path)(path, environ, port)
