"""Static assets from a worker's ``assets.directory``, resolved as wrangler resolves them.

A GET or HEAD under the worker's routes is answered from the directory when a file matches
(the request path is the file's path, as on Cloudflare); otherwise the worker's ``fetch``
runs, or, for a worker without one, ``not_found_handling`` decides (``404-page``: the
nearest ``404.html`` with status 404; ``single-page-application``: ``/index.html`` with 200).
``run_worker_first`` sends all requests, or those matching its patterns, to the worker
first; the worker reaches the files through its binding: ``await env.ASSETS.fetch(request)``.

``html_handling`` (default ``auto-trailing-slash``) maps ``/about`` to ``about.html`` or
``about/index.html`` and redirects (307) the other spellings to the one it serves.
"""

from __future__ import annotations

import fnmatch
import hashlib
import mimetypes
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

import runtime
from ocd.config.bindings import AssetsConfig


@dataclass(frozen=True, slots=True)
class Found:
    status: int  # 200, 307, 404 (a 404 page)
    file: Path | None = None
    location: str | None = None


class Assets:
    def __init__(self, config: AssetsConfig) -> None:
        self.config = config
        self.root = config.directory.resolve()

    # ---------------------------------------------------------------- resolution

    def _file(self, path: str) -> Path | None:
        """The file at URL path ``path``, if it is one inside the directory."""
        rel = urllib.parse.unquote(path).lstrip("/")
        candidate = (self.root / rel).resolve()
        if not candidate.is_relative_to(self.root) or not candidate.is_file():
            return None
        return candidate

    def resolve(self, path: str) -> Found | None:
        """What a request for ``path`` gets from the directory alone; None: no asset."""
        mode = self.config.html_handling
        f = self._file
        if mode == "none":
            file = f(path)
            return Found(200, file) if file else None
        if path.endswith("/"):
            stem = path.rstrip("/")
            file = f(path + "index.html") or (f(stem + ".html") if stem else None)
            if file is None:
                return None
            if mode == "drop-trailing-slash" and stem:
                return Found(307, location=stem)
            if mode == "auto-trailing-slash" and file.name != "index.html":
                return Found(307, location=stem)
            return Found(200, file)
        if path.endswith(".html") and f(path):
            stem = path[: -len("index.html")] if path.endswith("/index.html") else path[:-5]
            if mode == "force-trailing-slash" and not stem.endswith("/"):
                stem += "/"
            if mode == "drop-trailing-slash" and stem != "/":
                stem = stem.rstrip("/")
            return Found(307, location=stem or "/")
        file = f(path)
        if file is not None:
            return Found(200, file)
        html, index = f(path + ".html"), f(path + "/index.html")
        if mode == "force-trailing-slash" and (html or index):
            return Found(307, location=path + "/")
        if mode == "drop-trailing-slash" and (html or index):
            return Found(200, html or index)
        if html:
            return Found(200, html)
        if index:
            return Found(307, location=path + "/")
        return None

    def not_found(self, path: str) -> Found:
        mode = self.config.not_found_handling
        if mode == "single-page-application":
            index = self._file("/index.html")
            if index is not None:
                return Found(200, index)
        if mode == "404-page":
            parts = path.strip("/").split("/")
            for i in range(len(parts), -1, -1):
                page = self._file("/".join(["", *parts[:i], "404.html"]))
                if page is not None:
                    return Found(404, page)
        return Found(404)

    def worker_first(self, path: str) -> bool:
        rule = self.config.run_worker_first
        if isinstance(rule, bool):
            return rule
        included = any(fnmatch.fnmatchcase(path, p) for p in rule if not p.startswith("!"))
        excluded = any(fnmatch.fnmatchcase(path, p[1:]) for p in rule if p.startswith("!"))
        return included and not excluded

    # ---------------------------------------------------------------- answers

    def serve(self, request: web.Request) -> web.StreamResponse | None:
        """The asset response for ``request``; None when the worker should answer."""
        if request.method not in ("GET", "HEAD") or self.worker_first(request.path):
            return None
        found = self.resolve(request.path)
        return None if found is None else self._aiohttp(found, request)

    def fallback(self, request: web.Request) -> web.StreamResponse:
        """For a worker without fetch(): not_found_handling."""
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="Method Not Allowed\n")
        return self._aiohttp(self.not_found(request.path), request)

    def _aiohttp(self, found: Found, request: web.Request) -> web.StreamResponse:
        if found.location is not None:
            query = f"?{request.query_string}" if request.query_string else ""
            return web.Response(status=307, headers={"Location": found.location + query})
        if found.file is None:
            return web.Response(status=404)
        headers, etag = _headers(found.file)
        if found.status == 200 and request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        body = b"" if request.method == "HEAD" else found.file.read_bytes()
        response = web.Response(status=found.status, body=body, headers=headers)
        if request.method == "HEAD":
            response.content_length = found.file.stat().st_size
        return response

    def runtime_response(self, url: str) -> runtime.Response:
        path = urllib.parse.urlsplit(url).path or "/"
        found = self.resolve(path) or self.not_found(path)
        if found.location is not None:
            return runtime.Response(None, status=307, headers={"Location": found.location})
        if found.file is None:
            return runtime.Response(None, status=404)
        headers, _ = _headers(found.file)
        return runtime.Response(found.file.read_bytes(), status=found.status, headers=headers)


def _headers(file: Path) -> tuple[dict[str, str], str]:
    st = file.stat()
    etag = (
        '"'
        + hashlib.sha256(f"{file}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:32]
        + '"'
    )
    ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
        ctype += "; charset=utf-8"
    headers = {
        "Content-Type": ctype,
        "ETag": etag,
        "Cache-Control": "public, max-age=0, must-revalidate",
    }
    return headers, etag


class AssetsBinding:
    """``env.ASSETS``: ``await env.ASSETS.fetch(request)`` (or a URL) answers from the
    directory, with not_found_handling for a path no file matches."""

    def __init__(self, assets: Assets) -> None:
        self._assets = assets

    async def fetch(self, request: object, init: object = None) -> runtime.Response:
        url = str(getattr(request, "url", request))
        return self._assets.runtime_response(url)

    def __repr__(self) -> str:
        return f"<Assets binding {self._assets.root}>"
