"""``pyodide.http``: ``await pyfetch(url, method=..., headers=..., body=...)``, on aiohttp."""

from typing import Any

from runtime.fetch import FetchError, FetchResponse, fetch


async def pyfetch(url: str, **kwargs: Any) -> FetchResponse:
    return await fetch(url, **kwargs)


__all__ = ["FetchError", "FetchResponse", "pyfetch"]
