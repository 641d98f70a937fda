"""A request to a scoped route without a valid key is refused (401) before anything reads
its body (docs/security.md).

FastAPI reads and decodes a route's JSON body before it runs the route's dependencies, so
the scope check alone (``auth.ScopeCheck``) let a caller without a key learn 400 or 422
about a malformed body. This middleware, outside the body limit and the text guard, asks
the keyring first; the route's dependency still checks the scope (403) and hands the
route its ``Caller``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette._utils import get_route_path  # what the router matches routes on
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.api.auth import Keyring, bearer_token, route_scope, takes_user_tokens
from tidings.api.errors import error_response
from tidings.refusal import Refusal
from tidings.services.inbox import is_user_token


@dataclass(frozen=True)
class _Route:
    path: re.Pattern[str]
    methods: frozenset[str] | None  # None: a mounted app, any method
    scoped: bool
    # It takes user tokens (the inbox feed's routes): its own check reads them.
    users: bool = False


def _routes(app: FastAPI) -> list[_Route]:
    """The app's routes in the order the router tries them, each with whether it needs a
    key (a declared scope: not PUBLIC, not FastAPI's own /openapi.json, not a mount)."""
    found = []
    for context in iter_route_contexts(app.routes):
        pattern = getattr(context, "path_regex", None)
        if pattern is None:
            continue
        methods = context.methods
        scope = route_scope(getattr(context, "dependencies", ()))
        scoped = scope not in (None, "public")
        users = takes_user_tokens(getattr(context, "dependencies", ()))
        found.append(_Route(pattern, frozenset(methods) if methods else None, scoped, users))
    return found


class KeyFirst:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._routes: list[_Route] | None = None  # read at the first request: all included

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = await self._refusal(scope)
            route = self._route(scope) if refusal is not None else None
            if refusal is not None and route is not None and _refused(route, scope):
                response = error_response(
                    refusal.status_code,
                    refusal.code,
                    refusal.message,
                    refusal.field,
                    refusal.headers,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refusal(scope: Scope) -> Refusal | None:
        """Why the keyring refuses this request's key (None: a valid key, or no keys)."""
        keyring: Keyring = scope["app"].state.keyring
        try:
            await keyring.caller(bearer_token(Headers(scope=scope).get("authorization")))
        except Refusal as refusal:
            return refusal
        except Exception:
            # The keys could not be read (database away): the route's own check answers,
            # through the app's error handlers (503).
            return None
        return None

    def _route(self, scope: Scope) -> _Route | None:
        """The route this request reaches (the first whose path and method match, as the
        router picks it)."""
        if self._routes is None:
            self._routes = _routes(scope["app"])
        path = get_route_path(scope)
        method = scope["method"]
        for route in self._routes:
            if route.path.match(path) and (route.methods is None or method in route.methods):
                return route
        return None


def _refused(route: _Route, scope: Scope) -> bool:
    """Whether the key check refuses this request to ``route`` (it declares a scope, and
    it is not a user token to a route that reads them itself)."""
    return route.scoped and not (route.users and _user_token(scope))


def _user_token(scope: Scope) -> bool:
    """A user token in the header or the query: the route's own check reads it (401 when
    forged or expired). Such routes take no body."""
    headers = Headers(scope=scope)
    if is_user_token(bearer_token(headers.get("authorization"))):
        return True
    query = scope.get("query_string", b"").decode("latin-1")
    return "token=tdu_" in query
