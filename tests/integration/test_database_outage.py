"""A database connection that dies under the API is a 503 with Retry-After, never a 500."""

from __future__ import annotations

import httpx
import pytest
import sqlalchemy as sa

from tests.conftest import pg_admin
from tests.helpers import email_to, post, put_type


@pytest.mark.parametrize("backend", ["postgresql"])
async def test_killed_connections_are_503_not_500(
    client: httpx.AsyncClient, database_url: str
) -> None:
    await put_type(client)
    database = sa.make_url(database_url).database
    statuses = []
    for i in range(6):
        # Until the pool has live connections again (each dead one fails a request once),
        # then end every connection the service holds, as a database restart would.
        for _ in range(50):
            warm = await post(client, email_to(f"warm{i}@example.com"))
            assert warm.status_code in (202, 503), warm.text
            if warm.status_code == 202:
                break
        await pg_admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND pid <> pg_backend_pid()"
        )
        response = await post(client, email_to(f"after{i}@example.com"))
        statuses.append(response.status_code)
        if response.status_code == 503:
            assert response.headers["Retry-After"]
            assert response.json()["error"]["code"] == "database_unavailable"
    assert set(statuses) <= {202, 503}, statuses
    assert 503 in statuses  # the outage was seen, and answered as one
