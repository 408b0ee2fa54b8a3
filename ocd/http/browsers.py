"""What keeps web pages out of ocd's APIs: a page in the user's browser can send requests to
any address, ``127.0.0.1`` included, and without ``[[accounts]]`` nothing else stops it.

The rules, each the way local development servers guard themselves:

* **Host allow-list** (DNS rebinding): while a loopback listener is open (no
  ``[[accounts]]``, which the config requires to be on loopback), the request's ``Host``
  must name this machine: ``localhost``, ``*.localhost``, a loopback IP (``127.0.0.1``,
  ``[::1]``, …) or a host the listener was configured with; any port. A page on
  ``evil.example`` that re-resolves its name to 127.0.0.1 sends ``Host: evil.example``.
  With accounts, a token or a SigV4 signature guards every request (a rebound page has
  neither), and a reverse proxy in front may pass on its own ``Host``: no Host check.
* **Cross-site requests**: a browser says where a request comes from. ``Sec-Fetch-Site``
  other than ``same-origin`` or ``none`` (typed into the address bar), or, from a browser
  that sends no ``Sec-Fetch-Site``, an ``Origin`` that is not the request's own, is a page
  of another site: refused, whatever the method (an ``<img>`` makes a GET). wrangler, the
  Cloudflare SDKs, boto3, aws-cli, ``ocd`` and curl send neither header.
* **Content types**: from a browser, the Cloudflare API reads a JSON body only under a JSON
  content type (``ocd.http.cloudflare.validate``), which a page can send cross-site only
  after a CORS preflight ocd never grants; a ``text/plain`` or form body is refused before
  it is parsed. A browser marks every such request (``Origin`` on any cross-origin POST,
  ``Sec-Fetch-Site`` on every request of a current browser); a client that sends neither
  may declare its JSON as it likes (wrangler sends it as ``text/plain``, curl ``-d`` as a
  form).

Each surface answers a refusal in its own shape (Cloudflare's envelope, SQS's XML or JSON,
the dashboard's page); Worker fetch routes are the user's own, like ``wrangler dev``, and
are not guarded here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from aiohttp import web

from ocd.config.file import is_loopback

_KNOWN_MAX = 256  # Host headers remembered per listener; a flood of names is just re-checked


def host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port or brackets, lowercased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def local_name(name: str) -> bool:
    """Whether ``name`` (from :func:`host_name`) can only mean this machine."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def own_origin(request: web.Request, origin: str) -> bool:
    return origin == f"{request.scheme}://{request.host}"


def cross_site(request: web.Request) -> bool:
    """A browser's request made by a page of another origin (see the module docstring)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = request.headers.get("Origin")
    return origin is not None and not own_origin(request, origin)


def same_origin(request: web.Request) -> bool:
    """The dashboard's stricter rule for a request that changes something: it must say it
    comes from the dashboard's own origin (a form of its own page always does)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("Origin")
    return origin is not None and own_origin(request, origin)


def from_browser(request: web.Request) -> bool:
    """A request a browser made: it carries ``Origin`` or ``Sec-Fetch-Site``, which a page
    cannot remove and a CLI or SDK does not send (node's fetch, and so wrangler, sends
    ``Sec-Fetch-Mode`` but neither of these)."""
    h = request.headers
    return "Origin" in h or "Sec-Fetch-Site" in h


def json_type(content_type: str | None) -> bool:
    """``application/json`` or ``application/*+json``, with any parameters."""
    if not content_type:
        return False
    mime = content_type.partition(";")[0].strip().lower()
    return mime == "application/json" or (
        mime.startswith("application/") and mime.endswith("+json")
    )


class Guard:
    """One listener's rules. ``open`` says, at each request, whether it currently serves
    without tokens (a reload may add or remove ``[[accounts]]``)."""

    def __init__(
        self, listen_host: str, open: Callable[[], bool], also: tuple[str, ...] = ()
    ) -> None:
        self.loopback = is_loopback(listen_host)
        self.names = {host_name(h) for h in (listen_host, *also) if h}
        self.open = open
        self._known: dict[str, bool] = {}

    def foreign_host(self, request: web.Request) -> str | None:
        """Why the request's Host is refused (DNS rebinding); None when it is not."""
        if not self.loopback or not self.open():
            return None
        host = request.headers.get("Host")
        if host is None:  # HTTP/1.0 without one: no browser sends that
            return None
        ok = self._known.get(host)
        if ok is None:
            name = host_name(host)
            ok = local_name(name) or name in self.names
            if len(self._known) < _KNOWN_MAX:
                self._known[host] = ok
        if ok:
            return None
        return (
            f"Host {host!r} is not a name of this machine; this listener answers only "
            "localhost, *.localhost and loopback addresses while it has no [[accounts]]"
        )

    def refusal(self, request: web.Request) -> str | None:
        """Why an API request is refused: a foreign Host or a cross-site browser request."""
        why = self.foreign_host(request)
        if why is not None:
            return why
        if cross_site(request):
            return (
                "cross-site request refused: a web page may not use this API "
                "(Sec-Fetch-Site or Origin names another site)"
            )
        return None
