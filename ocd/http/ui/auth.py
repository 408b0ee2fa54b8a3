"""Who is looking at the dashboard, and what they may do.

- With no ``[[accounts]]`` (ocd then listens on loopback only) there is no login: the one
  account ``local``, read-only if ``[ui] read_only``.
- With accounts, a login form takes an API token, which the REST API's :class:`Accounts`
  checks against ``token_sha256``; the session is a cookie signed with a key kept in the
  database (the same on every node): ``HttpOnly``, ``SameSite=Strict``, path of the UI's
  parent (``/__ocd/``), ``Secure`` when the request came over TLS. A session lasts
  ``SESSION_S`` on the daemon's clock (``ocd.clock.SteadyClock``), so a step of the wall
  clock neither logs anyone out nor lengthens a session by the size of the step.
- A session lasts only as long as its token: at every request the cookie's token (by the
  prefix of its hash) must still be listed for the cookie's account in the running config.
  A reload that removes the token, or moves it to another account, ends the session at its
  next request (the live stream ends at its next tick). A reload that lowers the token to
  ``role = "read"`` makes the session read-only rather than ending it: it may still look,
  as the token may over REST. A role raised by a reload does not raise a session opened
  before it; logging in again does.
- A read-only session (``role = "read"``, or ``[ui] read_only``) gets 403 on every
  mutating route, whatever the page showed.
- CSRF: any request that is not GET/HEAD must carry ``Sec-Fetch-Site: same-origin`` or,
  where a browser sends none, an ``Origin`` equal to the request's own
  (``ocd.http.browsers.same_origin``, beside the rules that guard the APIs).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import NamedTuple

from aiohttp import web

from ocd.clock import Clock
from ocd.config import AccountConfig

COOKIE = "ocd_ui_session"
SESSION_S = 12 * 3600
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class Viewer(NamedTuple):
    account: str
    token_id: str  # "" without accounts
    read_only: bool


def sign(key: bytes, viewer: Viewer, now_s: float) -> str:
    """The cookie's value: ``viewer``, valid until ``now_s + SESSION_S`` (epoch seconds of
    the daemon's clock), signed with ``key``."""
    expires = int(now_s + SESSION_S)
    payload = json.dumps([viewer.account, viewer.token_id, viewer.read_only, expires])
    raw = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
    mac = hmac.new(key, raw.encode(), hashlib.sha256).hexdigest()
    return f"{raw}.{mac}"


def verify(key: bytes, value: str, now_s: float) -> Viewer | None:
    raw, _, mac = value.partition(".")
    good = hmac.new(key, raw.encode(), hashlib.sha256).hexdigest()
    if not mac or not hmac.compare_digest(mac, good):
        return None
    try:
        account, token_id, read_only, expires = json.loads(
            base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        )
    except (ValueError, TypeError):
        return None
    if now_s > expires:
        return None
    return Viewer(str(account), str(token_id), bool(read_only))


def identify(accounts: Sequence[AccountConfig], token: str) -> Viewer | None:
    """The account and role of an API token, as the config lists its SHA-256; every hash
    is compared, each in constant time. The token id in logs is a prefix of that hash."""
    token = token.strip()
    digest = hashlib.sha256(token.encode()).digest()
    found: Viewer | None = None
    for a in accounts:
        for h in a.token_sha256:
            if hmac.compare_digest(bytes.fromhex(h), digest) and token:
                found = Viewer(a.id, h[:12], h in a.read_only_sha256)
    return found


class Gate:
    """Decides each request's viewer; the session key is read once from the store, and
    sessions are timed by ``clock`` (the daemon's)."""

    def __init__(
        self,
        accounts: Sequence[AccountConfig],
        read_only: bool,
        key: bytes,
        cookie_path: str,
        clock: Clock,
    ) -> None:
        self.accounts: tuple[AccountConfig, ...] = ()
        self.tokens: dict[tuple[str, str], bool] = {}
        self.configure(accounts, read_only)
        self.key = key
        self.cookie_path = cookie_path
        self.clock = clock

    def configure(self, accounts: Sequence[AccountConfig], read_only: bool) -> None:
        """The accounts and tokens sessions are checked against (at start, after a reload)."""
        self.accounts = tuple(accounts)
        self.read_only = read_only
        # (account, token id) -> whether the token may only read
        self.tokens = {
            (a.id, h[:12]): h in a.read_only_sha256 for a in accounts for h in a.token_sha256
        }

    def _now_s(self) -> float:
        return self.clock() / 1000

    @property
    def login_required(self) -> bool:
        return bool(self.accounts)

    def viewer(self, request: web.Request) -> Viewer | None:
        if not self.accounts:
            return Viewer("local", "", self.read_only)
        value = request.cookies.get(COOKIE)
        found = verify(self.key, value, self._now_s()) if value else None
        return None if found is None else self.current(found)

    def current(self, v: Viewer) -> Viewer | None:
        """``v`` as the running config has it now: None once its token is gone, read-only
        once the token (or the whole dashboard) is."""
        if not self.accounts:
            return Viewer("local", "", self.read_only)
        reads = self.tokens.get((v.account, v.token_id))
        if reads is None:
            return None
        return v._replace(read_only=v.read_only or reads or self.read_only)

    def login(self, token: str) -> Viewer | None:
        v = identify(self.accounts, token)
        return None if v is None else v._replace(read_only=v.read_only or self.read_only)

    def set_cookie(self, request: web.Request, response: web.StreamResponse, v: Viewer) -> None:
        response.set_cookie(
            COOKIE,
            sign(self.key, v, self._now_s()),
            path=self.cookie_path,
            httponly=True,
            samesite="Strict",
            secure=request.secure or request.headers.get("X-Forwarded-Proto") == "https",
            max_age=SESSION_S,
        )

    def clear_cookie(self, response: web.StreamResponse) -> None:
        response.del_cookie(COOKIE, path=self.cookie_path)
