"""``import asgi`` as Cloudflare's FastAPI example does it: see ``runtime.asgi``."""

from runtime.asgi import fetch

__all__ = ["fetch"]
