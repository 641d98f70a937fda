"""API keys (docs/security.md): every route declares a scope, a key of one namespace sees
and replays only its own notifications, a key may have an accept rate, the service
refuses to serve a network address without keys, `tidings keys` creates, lists and
revokes them, and the database holds only their hashes."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount

from tests.helpers import email_to, post
from tests.integration.test_dead_letters import failed_delivery
from tidings.api.app import DOCS_ASSETS, create_app
from tidings.api.auth import (
    ALL_SCOPES,
    Keyring,
    Scope,
    issue_key,
    route_scope,
)
from tidings.clock import utcnow
from tidings.service import Service
from tidings.store import api_keys
from tidings.store.engine import connect

# Routes that need no key; each carries its own proof or reveals nothing. The dashboard
# signs in with a key of its own and checks the session on every page.
PUBLIC_PREFIXES = (
    "/v1/webhooks/",
    "/u/",
    "/p/",  # the preference center: its signed link is its proof (docs/inbox.md)
    "/t/",
    "/healthz",
    "/readyz",
    "/docs",
    "/openapi.json",
    "/dashboard",
    "/inbox.js",  # the inbox's web component: no secret in it (docs/inbox.md)
)
# Mounted apps have no route dependencies to declare a scope with: each is named here with
# why it needs no key, and any other mount fails the walk.
MOUNTS = {DOCS_ASSETS: "Swagger UI's own files, as in the installed package"}
Keys = Callable[..., AsyncIterator[httpx.AsyncClient]]


@pytest.fixture
def app(service: Service) -> FastAPI:
    return create_app(service)


async def add_key(
    app: FastAPI, name: str, scopes: Any, namespace: str = "default", rate: float | None = None
) -> str:
    service: Service = app.state.service
    key, stored = issue_key(name, [Scope(s).value for s in scopes], namespace, rate)
    await api_keys.insert(service.db, stored)
    keyring: Keyring = app.state.keyring
    keyring.forget()  # as another process would see it within api_key_refresh_seconds
    return key


def http(app: FastAPI, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://tidings", headers=headers)


def operations(app: FastAPI) -> list[tuple[str, str, str | None]]:
    """The OpenAPI document's operations and the scope each says it needs."""
    return [
        (method.upper(), path, operation.get("x-tidings-scope"))
        for path, methods in app.openapi()["paths"].items()
        for method, operation in methods.items()
    ]


def routes(app: FastAPI) -> list[tuple[str, str, str | None]]:
    """Every route the app serves, as (method, path, scope), from its route list as requests
    meet it: routes left out of the OpenAPI document included, a router's dependencies
    included. Mounted apps are left out, each for the reason ``MOUNTS`` gives."""
    found = []
    for context in iter_route_contexts(app.routes):
        if isinstance(context.original_route, Mount):
            assert context.path in MOUNTS, f"{context.path}: a mounted app not in MOUNTS"
            continue
        if context.path == app.openapi_url:
            scope: str | None = "public"  # FastAPI's own route: it takes no dependencies
        else:
            scope = route_scope(getattr(context, "dependencies", ()))
        path = context.path_format or context.path or ""
        found.extend((method, path, scope) for method in sorted(context.methods or ()))
    return found


def test_every_route_declares_a_scope_or_is_public(app: FastAPI) -> None:
    found = routes(app)
    assert len(found) > 30
    undeclared = [(m, p) for m, p, scope in found if scope is None]
    assert undeclared == [], "routes without a scope (api/auth.py: needs(...) or PUBLIC)"
    public = [p for _, p, scope in found if scope == "public"]
    assert all(p.startswith(PUBLIC_PREFIXES) for p in public), public
    assert {scope for _, _, scope in found} == {"public", *(s.value for s in Scope)}
    # The walk reaches the routes the document leaves out...
    assert {("GET", "/docs", "public"), ("POST", "/dashboard/login", "public")} <= set(found)
    # ...and the document says of each operation what its route declares.
    assert set(operations(app)) <= set(found)


def filled(path: str) -> str:
    # A UUID serves every path parameter: ids parse, names and tokens accept it.
    return re.sub(r"\{[^}]+\}", "00000000-0000-4000-8000-000000000001", path)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_route_by_scope_matrix(app: FastAPI) -> None:
    """For every scoped route: no key 401, a key with any other scope 403, its own scope
    neither (whatever the route then makes of the request)."""
    keys = {scope: await add_key(app, f"only-{scope.value}", [scope]) for scope in Scope}
    wrong: list[str] = []
    for method, path, scope in routes(app):
        if scope == "public":
            continue
        url = filled(path)
        body = {} if method in ("POST", "PUT") else None
        # The inbox's stream never ends once its scope lets it open: a bad Last-Event-ID
        # ends it with a 422, after the scope check (tests/integration/test_inbox_stream.py
        # reads it over a socket).
        headers = {"Last-Event-ID": "not-an-id"} if path.endswith("/stream") else None
        async with http(app) as anonymous:
            answer = await anonymous.request(method, url, json=body, headers=headers)
            if answer.status_code != 401 or answer.headers.get("WWW-Authenticate") is None:
                wrong.append(f"{method} {path} without a key: {answer.status_code}")
        for holder, key in keys.items():
            async with http(app, key) as client:
                answer = await client.request(method, url, json=body, headers=headers)
                status = answer.status_code
            allowed = holder.value == scope
            if allowed == (status in (401, 403)) or (not allowed and status != 403):
                wrong.append(f"{method} {path} with a {holder.value} key: {status}")
    assert wrong == []


async def test_without_keys_the_service_is_open_until_the_first_key(app: FastAPI) -> None:
    async with http(app) as anonymous:
        assert (await anonymous.get("/v1/dead-letters")).status_code == 200
        key = await add_key(app, "ops", [Scope.ADMIN])
        refused = await anonymous.get("/v1/dead-letters")
        assert refused.status_code == 401
        assert refused.json()["error"]["field"] == "Authorization"
        forged = await anonymous.get(
            "/v1/dead-letters", headers={"Authorization": "Bearer tdk_" + "x" * 43}
        )
        assert forged.status_code == 401
    async with http(app, key) as ops:
        assert (await ops.get("/v1/dead-letters")).status_code == 200
        service: Service = app.state.service
        assert await api_keys.revoke(service.db, ["ops"], utcnow()) == ["ops"]
        app.state.keyring.forget()
        # Revoked, and the last key: the service stays closed.
        assert (await ops.get("/v1/dead-letters")).status_code == 401
    async with http(app) as anonymous:
        assert (await anonymous.get("/v1/dead-letters")).status_code == 401
        assert (await anonymous.get("/healthz")).status_code == 200


async def test_a_namespace_sees_and_replays_only_its_own(app: FastAPI, service: Service) -> None:
    setup = await add_key(app, "setup", ALL_SCOPES, namespace="a")
    other = await add_key(app, "b", [Scope.SEND, Scope.READ, Scope.ADMIN], namespace="b")
    async with http(app, setup) as a, http(app, other) as b:
        accepted = await failed_delivery(a, service)
        notification, delivery = accepted["id"], accepted["deliveries"][0]["id"]
        assert (await a.get(f"/v1/notifications/{notification}")).status_code == 200
        assert (await b.get(f"/v1/notifications/{notification}")).status_code == 404
        assert [d["id"] for d in (await a.get("/v1/dead-letters")).json()] == [delivery]
        assert (await b.get("/v1/dead-letters")).json() == []
        assert (await b.post(f"/v1/deliveries/{delivery}/replay")).status_code == 404
        assert (await a.post(f"/v1/deliveries/{delivery}/replay")).status_code == 200

        # One idempotency key, two teams: two notifications, no conflict.
        first = await post(a, email_to("ana@example.com"), key="order-1")
        second = await post(b, email_to("bea@example.com"), key="order-1")
        assert (first.status_code, second.status_code) == (202, 202)
        assert first.json()["id"] != second.json()["id"]
        again = await post(b, email_to("bea@example.com"), key="order-1")
        assert again.headers.get("Idempotent-Replayed") == "true"
        assert again.json()["id"] == second.json()["id"]


async def test_campaigns_are_their_namespaces(app: FastAPI) -> None:
    setup = await add_key(app, "setup", ALL_SCOPES, namespace="a")
    other = await add_key(app, "b", [Scope.CAMPAIGNS], namespace="b")
    async with http(app, setup) as a, http(app, other) as b:
        kind = {"category": "marketing", "priority": "low", "channels": ["email"]}
        assert (await a.put("/v1/types/promo", json=kind)).status_code == 201
        template = {"subject": "Hi", "text": "hello"}
        assert (await a.put("/v1/templates/promo/email/en", json=template)).status_code == 201
        body = {"type": "promo", "audience": {"userIds": ["u1"]}}
        created = await a.post("/v1/campaigns", json=body, headers={"Idempotency-Key": "c1"})
        assert created.status_code == 202, created.text
        campaign = created.json()["campaignId"]
        assert (await b.get(f"/v1/campaigns/{campaign}")).status_code == 404
        assert (await b.post(f"/v1/campaigns/{campaign}/cancel")).status_code == 404
        assert (await b.get("/v1/campaigns")).json()["campaigns"] == []
        assert (await a.get(f"/v1/campaigns/{campaign}")).status_code == 200


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_key_over_its_accept_rate_is_told_when_to_retry(app: FastAPI) -> None:
    setup = await add_key(app, "setup", ALL_SCOPES)
    limited = await add_key(app, "runaway", [Scope.SEND], rate=3)
    async with http(app, setup) as admin, http(app, limited) as runaway:
        kind = {"category": "transactional", "priority": "normal", "channels": ["email"]}
        assert (await admin.put("/v1/types/order.confirmed", json=kind)).status_code == 201
        template = {"subject": "Hi", "text": "hello"}
        url = "/v1/templates/order.confirmed/email/en"
        assert (await admin.put(url, json=template)).status_code == 201
        statuses = [(await post(runaway, email_to())).status_code for _ in range(5)]
        assert statuses[:3] == [202, 202, 202] and 429 in statuses[3:], statuses
        refused = await post(runaway, email_to())
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) >= 1
        # Another key is not held back by this one's rate.
        assert (await post(admin, email_to())).status_code == 202


def on_network(port: int, *extra: str) -> list[str]:
    return ["--host", "0.0.0.0", "--port", str(port), *extra]


async def dead_letters(base: str, key: str | None) -> int:
    """The status of ``GET /v1/dead-letters`` (scope admin) with ``key``, or without one."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(base_url=base, headers=headers) as client:
        return (await client.get("/v1/dead-letters")).status_code


async def every_cell(url: str, table: str) -> list[str]:
    """Every value of every row of ``table`` as text, with the columns the database itself
    lists (a column added later is read too)."""
    db = connect(url)
    try:
        async with db.engine.connect() as conn:
            names = await conn.run_sync(
                lambda sync: [column["name"] for column in sa.inspect(sync).get_columns(table)]
            )
            assert len(names) >= 9, names
            columns = (sa.cast(sa.column(name), sa.Text) for name in names)
            rows = (await conn.execute(sa.select(*columns).select_from(sa.table(table)))).all()
    finally:
        await db.dispose()
    return [cell for row in rows for cell in row if cell is not None]
