"""What schemathesis found, pinned down: the API answers what its OpenAPI document says."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tidings.api.app import create_app
from tidings.service import Service


@pytest.fixture
def openapi(service: Service) -> dict[str, Any]:
    document: dict[str, Any] = create_app(service).openapi()
    return document


async def test_405_allows_every_method_of_the_path(client: httpx.AsyncClient) -> None:
    # PUT and GET /v1/types/{name} are two routes; Allow used to name only the first.
    response = await client.request("OPTIONS", "/v1/types/otp")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, PUT"
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert (await client.patch("/v1/users/u1")).headers["allow"] == "DELETE, GET, PUT"


def test_errors_are_documented_in_the_api_error_format(openapi: dict[str, Any]) -> None:
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    put_type = openapi["paths"]["/v1/types/{name}"]["put"]["responses"]
    for code in ("400", "404", "413", "422", "500", "503"):
        assert put_type[code]["content"]["application/json"]["schema"] == error, code
    assert "HTTPValidationError" not in openapi["components"]["schemas"]
    unsubscribe = openapi["paths"]["/u/{token}"]["post"]["responses"]
    assert "text/html" in unsubscribe["400"]["content"]


async def test_bad_json_and_unroutable_paths_answer_as_documented(
    client: httpx.AsyncClient, openapi: dict[str, Any]
) -> None:
    bad_json = await client.post(
        "/v1/devices", content=b"\x01", headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 400
    assert "400" in openapi["paths"]["/v1/devices"]["post"]["responses"]
    # A line break in {address:path} matches no route: the router's 404.
    unroutable = await client.put("/v1/suppressions/email/a%0Ab@example.com", json={})
    assert unroutable.status_code == 404
    assert "404" in openapi["paths"]["/v1/suppressions/{channel}/{address}"]["put"]["responses"]


def test_links_lead_from_creating_to_using(openapi: dict[str, Any]) -> None:
    put_type = openapi["paths"]["/v1/types/{name}"]["put"]["responses"]["200"]["links"]
    send = put_type["SendNotification"]
    assert send["operationId"] == openapi["paths"]["/v1/notifications"]["post"]["operationId"]
    assert send["requestBody"] == {"type": "$response.body#/name"}
    put_user = openapi["paths"]["/v1/users/{user_id}"]["put"]["responses"]["200"]["links"]
    assert put_user["GetUser"]["parameters"] == {"user_id": "$response.body#/id"}
    upload = "/v1/templates/{type_name}/{channel}/{locale}"
    preview = openapi["paths"][upload]["put"]["responses"]["201"]["links"]["Preview"]
    assert preview["requestBody"]["type"] == "$response.body#/type"


@pytest.mark.parametrize("value", [0, 1, "true", None])
async def test_preference_switches_must_be_booleans(client: httpx.AsyncClient, value: Any) -> None:
    response = await client.put(
        "/v1/users/u1/preferences", json={"categories": {"marketing": {"email": value}}}
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "categories.marketing.email"
