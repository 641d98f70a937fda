"""What a new user meets first: a quiet /readyz, types created with 201, /docs offline,
and a webhook type that needs no template."""

from __future__ import annotations

import logging
import re

import httpx
import pytest


async def test_readyz_does_not_log_alembic_lines(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            response = await client.get("/readyz")
            assert response.status_code == 200, response.text
    assert [r.getMessage() for r in caplog.records if r.name.startswith("alembic")] == []


async def test_put_type_answers_201_on_create_and_200_on_update(
    client: httpx.AsyncClient,
) -> None:
    kind = {"category": "transactional", "priority": "normal", "channels": ["email"]}
    created = await client.put("/v1/types/order.shipped", json=kind)
    assert created.status_code == 201, created.text
    replaced = await client.put("/v1/types/order.shipped", json={**kind, "ttl": 60})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["ttl"] == 60
    declared = (await client.get("/openapi.json")).json()
    responses = declared["paths"]["/v1/types/{name}"]["put"]["responses"]
    assert {"200", "201"} <= responses.keys()


async def test_put_user_answers_201_on_create_and_200_on_update(
    client: httpx.AsyncClient,
) -> None:
    created = await client.put("/v1/users/ana", json={"email": "ana@example.com"})
    assert created.status_code == 201, created.text
    replaced = await client.put("/v1/users/ana", json={"locale": "pt-BR"})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["locale"] == "pt-BR"
    declared = (await client.get("/openapi.json")).json()
    responses = declared["paths"]["/v1/users/{user_id}"]["put"]["responses"]
    assert {"200", "201"} <= responses.keys()


async def test_docs_page_loads_swagger_ui_from_the_service_itself(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/docs")
    assert page.status_code == 200
    assert re.search(r"https?://", page.text.replace("http://tidings", "")) is None, page.text
    assets = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", page.text)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    for asset in assets:
        answer = await client.get(asset)
        assert answer.status_code == 200, asset
        assert len(answer.content) > 100
