"""The worker that answers every path no route claims, as ``wrangler dev`` sends every
request to its one Worker: the only worker with a ``fetch`` handler and no ``routes``.
When several qualify, none is chosen and the config is refused, naming each of them."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from ocd.config import Config
from ocd.errors import ConfigError, Problem
from ocd.loader import LoadedWorker

EVERY_PATH = "/"


def catch_all(config: Config, serving: Collection[str]) -> str | None:
    """The name of the catch-all worker among ``serving`` (the workers with a ``fetch``
    handler), or None; ConfigError with a problem for each worker when several qualify."""
    candidates = [w for w in config.workers if not w.routes and w.name in serving]
    if len(candidates) <= 1:
        return candidates[0].name if candidates else None

    def others(name: str) -> str:
        return ", ".join(f'"{w.name}"' for w in candidates if w.name != name)

    raise ConfigError(
        [
            Problem(
                config.path,
                w.key_path,
                f'worker "{w.name}" has a fetch handler and no routes, and so has '
                f"{others(w.name)}: only one of them can answer every path; add "
                'routes = ["/..."] (the path prefixes it serves) to all but one',
            )
            for w in candidates
        ]
    )


def serving(python: Iterable[LoadedWorker], js: Collection[str]) -> set[str]:
    """The workers with a ``fetch`` handler: Python ones as imported, JavaScript ones as
    their bundles export it (``js``, found by ``ocd.js.handlers``)."""
    return {w.config.name for w in python if w.fetch is not None} | set(js)


def routes_of(routes: tuple[str, ...], name: str, catch_all_name: str | None) -> tuple[str, ...]:
    """A worker's route prefixes, the catch-all's being every path."""
    return (EVERY_PATH,) if not routes and name == catch_all_name else routes
