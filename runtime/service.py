"""Service bindings as worker code sees them: ``env.API``, another worker of the same ocd.

``await env.API.fetch(request)`` (an incoming request passed on, its method, headers and body
with it), ``await env.API.fetch("http://api/path", method="POST", body="...")`` or with an
options dict, as the global ``fetch`` takes them; the answer is a :class:`FetchResponse`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runtime.fetch import FetchResponse, Outgoing, outgoing

# What ocd plugs in behind a binding: sends one request to the bound worker.
ServiceBackend = Callable[[Outgoing], Awaitable[FetchResponse]]


class Fetcher:
    """``env.<binding>`` of a ``services`` binding."""

    def __init__(self, backend: ServiceBackend, name: str = "") -> None:
        self._backend = backend
        self._name = name

    async def fetch(self, resource: Any, init: Any = None, /, **kwargs: Any) -> FetchResponse:
        """The bound worker's ``fetch``, given ``resource`` (a URL or a request)."""
        return await self._backend(await outgoing(resource, init, kwargs))

    def __repr__(self) -> str:
        return f"<Service binding to {self._name}>" if self._name else "<Service binding>"
