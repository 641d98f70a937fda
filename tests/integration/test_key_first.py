"""A request without a valid key is refused with 401 before its body is read
(docs/security.md): whatever the body, the query or the size, a caller without a key
learns nothing of how the route would have read them."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from tests.integration.test_api_keys import add_key, filled, http, operations
from tidings.api.app import create_app
from tidings.api.auth import Scope
from tidings.service import Service

# What a route would refuse, were the caller allowed: malformed JSON, a JSON value of the
# wrong shape, a NUL the text guard refuses, a form body, and a body over the size limit.
BAD_BODIES: list[tuple[bytes, str]] = [
    (b'{"to": ', "application/json"),
    (b"[1, 2]", "application/json"),
    (b'{"type": "a\\u0000"}', "application/json"),
    (b"a=%ff&b", "application/x-www-form-urlencoded"),
    (b"x" * (4 * 1024 * 1024 + 1), "application/json"),
]
JSON = {"content-type": "application/json"}


@pytest.fixture
def app(service: Service) -> FastAPI:
    return create_app(service)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_every_scoped_operation_answers_401_before_reading_the_body(app: FastAPI) -> None:
    key = await add_key(app, "ops", list(Scope))
    scoped = [(m, p) for m, p, scope in operations(app) if scope not in (None, "public")]
    assert len(scoped) > 30
    wrong: list[str] = []
    async with http(app) as anonymous, http(app, "tdk_" + "x" * 43) as forged:
        for method, path in scoped:
            for body, content_type in BAD_BODIES:
                for client in (anonymous, forged):
                    answer = await client.request(
                        method,
                        filled(path) + "?limit=%00",
                        content=body,
                        headers={"content-type": content_type},
                    )
                    if answer.status_code != 401 or answer.json()["error"]["field"] != (
                        "Authorization"
                    ):
                        wrong.append(f"{method} {path} {body[:12]!r}: {answer.status_code}")
    assert wrong == []
    # With the key, the same malformed body is the route's to judge, as before.
    async with http(app, key) as allowed:
        answer = await allowed.post("/v1/webhook-endpoints", content=b'{"url": ', headers=JSON)
        assert answer.status_code == 400, answer.text


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_public_routes_still_read_their_own_proof(app: FastAPI) -> None:
    """A provider's webhook carries a signature, not a key: it is not answered 401."""
    await add_key(app, "ops", [Scope.ADMIN])
    async with http(app) as anonymous:
        answer = await anonymous.post("/v1/webhooks/sendgrid/nobody", content=b"{", headers=JSON)
        assert answer.status_code != 401
        assert (await anonymous.get("/healthz")).status_code == 200
