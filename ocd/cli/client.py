"""The blocking HTTP client of ``ocd queues …`` for ocd's Queues REST API, and its errors.

:class:`CliError` carries the exit code the CLI ends with; :class:`ApiFailure` is the API
refusing a call (its ``errors`` rendered one per line, their codes kept in ``codes``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

EXIT_OK, EXIT_API, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
TIMEOUT_S = 30.0
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_API) -> None:
        super().__init__(message)
        self.code = code


class ApiFailure(CliError):
    def __init__(self, errors: list[dict[str, Any]], status: int) -> None:
        lines = [f"error {e.get('code')}: {e.get('message')}" for e in errors]
        super().__init__("\n".join(lines) or f"error: HTTP {status} with no error message")
        self.codes = [e.get("code") for e in errors]


class Client:
    """Blocking JSON calls to one account of one ocd; returns the envelope on success."""

    def __init__(self, url: str, account: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self.account = account
        self.token = token
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CliError(f"error: --url must be an http(s) URL, got {url!r}", EXIT_USAGE)
        host = parts.hostname
        # A proxy from the environment would only get in the way of a local daemon.
        handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK else []
        self._opener = urllib.request.build_opener(*handlers)

    def api_url(self, path: str, under: str = "/queues") -> str:
        return f"{self.url}/client/v4/accounts/{quote(self.account)}{under}{path}"

    def call(
        self,
        method: str,
        path: str = "",
        body: Any = None,
        timeout_s: float = TIMEOUT_S,
        under: str = "/queues",
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.api_url(path, under), data, headers, method=method)
        try:
            with self._opener.open(req, timeout=timeout_s) as resp:
                return _envelope(resp.read(), resp.status)
        except urllib.error.HTTPError as e:
            with e:
                envelope = _envelope(e.read(), e.code)
            raise ApiFailure(envelope.get("errors") or [], e.code) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            reason = _reason(e.reason if isinstance(e, urllib.error.URLError) else e)
            raise CliError(f"error: cannot reach ocd at {self.url}: {reason}") from None


def quote(part: str) -> str:
    """``part`` as one URL path segment."""
    return urllib.parse.quote(part, safe="")


def _envelope(raw: bytes, status: int) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict) or "success" not in data:
        raise CliError(f"error: HTTP {status}, and the response is not a Cloudflare API envelope")
    return data


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, TimeoutError):
        return "timed out"
    return getattr(reason, "strerror", None) or str(reason)
