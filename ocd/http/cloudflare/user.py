"""What wrangler asks before it touches a queue: the token (``/user/tokens/verify``), the
user (``/user``), the caller's accounts (``/accounts``, ``/memberships``) and the worker
behind a consumer (``/accounts/{a}/workers/services/{name}``); and a clean refusal of event
subscriptions, which ocd does not provide.

With these, ``wrangler queues ...`` and ``wrangler whoami`` work with only
``CLOUDFLARE_API_BASE_URL`` and ``CLOUDFLARE_API_TOKEN`` set (README, "Using wrangler with
ocd"). Tokens are the ones ``[[accounts]]`` lists; without accounts (a loopback listener)
any token is a fixed active one that opens the account ``local``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from aiohttp import web

from ocd.http.cloudflare.context import ApiContext, iso
from ocd.http.cloudflare.envelope import (
    AUTH_ERROR,
    FEATURE_NOT_SUPPORTED,
    INVALID_TOKEN,
    SERVICE_NOT_FOUND,
    USER_UNAUTHORIZED,
    ApiError,
    ApiRouter,
    ok,
)
from ocd.http.cloudflare.queues import MAX_PER_PAGE, _query_int

ENVIRONMENT = "production"  # the one environment of every ocd worker
SUBSCRIPTIONS = "/accounts/{account_id}/event_subscriptions/subscriptions"


class UserRoutes:
    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx

    def add_to(self, router: ApiRouter, prefix: str = "") -> None:
        router.add_get(prefix + "/user/tokens/verify", self.verify)
        router.add_get(prefix + "/user", self.user)
        router.add_get(prefix + "/accounts", self.accounts)
        router.add_get(prefix + "/memberships", self.memberships)
        router.add_get(prefix + "/accounts/{account_id}/workers/services/{name}", self.service)
        subs = prefix + SUBSCRIPTIONS
        for method, path in (
            ("GET", subs),
            ("POST", subs),
            ("GET", subs + "/{subscription_id}"),
            ("PATCH", subs + "/{subscription_id}"),
            ("DELETE", subs + "/{subscription_id}"),
        ):
            router.add_route(method, path, self.not_supported)

    async def verify(self, request: web.Request) -> web.Response:
        if not self.ctx.accounts.of(request):
            raise ApiError(401, INVALID_TOKEN, "Invalid API Token")
        token = request.headers.get("Authorization", "").partition(" ")[2].strip()
        token_id = hashlib.sha256(token.encode()).hexdigest()[:32]
        return ok(
            {"id": token_id, "status": "active"},
            messages=["This API Token is valid and active"],
        )

    async def user(self, request: web.Request) -> web.Response:
        # ocd's tokens belong to accounts, not to users with an email address.
        raise ApiError(403, USER_UNAUTHORIZED, "Unauthorized to access requested resource")

    def _page(self, request: web.Request, items: list[dict[str, Any]]) -> web.Response:
        page = _query_int(request, "page", 1, 1, 1_000_000)
        per_page = _query_int(request, "per_page", 20, 1, MAX_PER_PAGE)
        chunk = items[(page - 1) * per_page : page * per_page]
        info = {
            "page": page,
            "per_page": per_page,
            "count": len(chunk),
            "total_count": len(items),
            "total_pages": max(1, -(-len(items) // per_page)),
        }
        return ok(chunk, result_info=info)

    async def accounts(self, request: web.Request) -> web.Response:
        return self._page(request, [_account(a) for a in self._caller(request)])

    async def memberships(self, request: web.Request) -> web.Response:
        members = [
            {
                "id": hashlib.sha256(f"membership {a}".encode()).hexdigest()[:32],
                "account": {"id": a, "name": _name(a)},
                "roles": ["Administrator"],
                "status": "accepted",
                "permissions": {"queues": {"read": True, "write": True}},
            }
            for a in self._caller(request)
        ]
        return self._page(request, members)

    def _caller(self, request: web.Request) -> list[str]:
        found = self.ctx.accounts.of(request)
        if not found:
            raise ApiError(403, AUTH_ERROR, "Authentication error")
        return found

    async def service(self, request: web.Request) -> web.Response:
        account = self.ctx.account(request)
        name = request.match_info["name"]
        if (account, name) not in self.ctx.workers:
            raise ApiError(404, SERVICE_NOT_FOUND, f"This Worker does not exist: {name}")
        script = {"id": name}
        return ok(
            {
                "id": name,
                "default_environment": {"environment": ENVIRONMENT, "script": script},
                "environments": [{"environment": ENVIRONMENT, "script": script}],
            }
        )

    async def not_supported(self, request: web.Request) -> web.Response:
        self.ctx.account(request)
        raise ApiError(
            501,
            FEATURE_NOT_SUPPORTED,
            "Event subscriptions are not supported by ocd: only queues, their consumers and "
            "messages are",
        )


def _name(account: str) -> str:
    return f"ocd {account}"


def _account(account: str) -> dict[str, Any]:
    return {
        "id": account,
        "name": _name(account),
        "type": "standard",
        "settings": {"enforce_twofactor": False},
        "created_on": iso(0),
    }
