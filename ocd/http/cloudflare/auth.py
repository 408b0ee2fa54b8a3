"""Who may use an account: a bearer token whose SHA-256 is listed for it.

With no ``[[accounts]]`` configured, ocd serves the one account ``local`` to anyone (it then
listens on loopback only, which the config enforces). A token listed with ``role = "read"``
may read (GET, and the POSTs that only look: peek, browse, search) but gets 403 on every
route that changes something.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Mapping, Sequence

from aiohttp import web

from ocd.http.cloudflare.envelope import AUTH_ERROR, ApiError

LOCAL = "local"
# POSTs that change nothing, open to read-only tokens.
READ_ONLY_POSTS = ("/messages/peek", "/messages/browse", "/messages/search")


class Accounts:
    def __init__(
        self, tokens: Mapping[str, Sequence[str]], read_only: Collection[str] = ()
    ) -> None:
        self._tokens = {a: [bytes.fromhex(h) for h in hashes] for a, hashes in tokens.items()}
        self._read_only = {bytes.fromhex(h) for h in read_only}
        self.open = not tokens

    def ids(self) -> list[str]:
        return [LOCAL] if self.open else sorted(self._tokens)

    def of(self, request: web.Request) -> list[str]:
        """The accounts the caller's bearer token opens (``local`` for anyone when no
        accounts are configured), sorted."""
        if self.open:
            return [LOCAL]
        digest = _digest(request)
        if digest is None:
            return []
        found = []
        for account, hashes in sorted(self._tokens.items()):
            match = False
            for h in hashes:
                match |= hmac.compare_digest(h, digest)
            if match:
                found.append(account)
        return found

    def check(self, request: web.Request, account: str) -> None:
        """Raise the same 403 for a bad token, a missing one and an unknown account."""
        if self.open:
            if account == LOCAL:
                return
            raise _denied()
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        digest = hashlib.sha256(token.strip().encode()).digest()
        allowed = self._tokens.get(account, [])
        # Compare against every hash, each in constant time, so timing tells nothing.
        match = False
        for h in allowed:
            match |= hmac.compare_digest(h, digest)
        if scheme.lower() != "bearer" or not token or not match:
            raise _denied()
        if digest in self._read_only and not _reads(request):
            raise ApiError(403, AUTH_ERROR, 'this token may only read (role = "read")')


def _reads(request: web.Request) -> bool:
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return True
    return request.method == "POST" and request.path.endswith(READ_ONLY_POSTS)


def _digest(request: web.Request) -> bytes | None:
    """SHA-256 of the request's bearer token; None without one."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return hashlib.sha256(token.strip().encode()).digest()


def _denied() -> ApiError:
    return ApiError(403, AUTH_ERROR, "Authentication error")
