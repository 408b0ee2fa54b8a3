"""Names Cloudflare's ``workers`` and ``js`` modules export for features ocd does not run.

They exist so that a module imports; using one raises ``NotImplementedError`` naming the
feature. ocd's loader also looks for :class:`Unsupported` placeholders among a worker
module's names and refuses the worker when it loads (``ocd check-config``), so a module
that needs one fails before it serves a request, not during one.
"""

from __future__ import annotations

from typing import Any, NoReturn

ADVICE = "remove it or run this worker under wrangler dev"


def refuse(feature: str) -> NoReturn:
    raise NotImplementedError(f"{feature} is not supported by ocd; {ADVICE}")


class Unsupported:
    """A placeholder for ``feature``: importable, and raising NotImplementedError on use."""

    def __init__(self, feature: str) -> None:
        object.__setattr__(self, "feature", feature)

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(name)
        refuse(self.feature)

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse(self.feature)

    def __repr__(self) -> str:
        return f"<unsupported {self.feature}>"


class DurableObject:
    """Base class of a Durable Object. A module may define one; binding it needs
    ``durable_objects`` in the wrangler file, which ocd refuses."""

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class WorkflowEntrypoint:
    """Base class of a Workflow. A module may define one; running it needs a ``workflows``
    binding, which ocd refuses."""

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class WorkflowStep:
    def do(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse("Workflows (WorkflowStep.do)")


def import_from_javascript(name: str) -> NoReturn:
    refuse(f"import_from_javascript({name!r})")
