"""Bad input gets a 4xx JSON error naming the field; never a 500."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import email_to, post, put_type

PAST = (datetime.now(UTC) - timedelta(hours=1)).isoformat()

CASES: list[tuple[str, dict[str, Any], int, str | None, str]] = [
    (
        "unknown type",
        {"type": "nope", "to": {"email": "a@example.com"}},
        422,
        "type",
        "unknown_type",
    ),
    (
        "channel not allowed",
        {**email_to(), "channels": ["push", "email"], "type": "mail.only"},
        422,
        "channels",
        "channel_not_allowed",
    ),
    (
        "no address",
        {"type": "order.confirmed", "channels": ["sms"], "to": {"email": "a@example.com"}},
        422,
        "to.phone",
        "no_address",
    ),
    ("no address at all", {"type": "order.confirmed"}, 422, "to", "no_address"),
    ("malformed email", email_to("not-an-email"), 422, "to.email", "invalid_request"),
    (
        "phone not E.164",
        {"type": "order.confirmed", "to": {"phone": "11 91234-5678"}},
        422,
        "to.phone",
        "invalid_request",
    ),
    (
        "priority above the type's",
        {**email_to(), "priority": "high"},
        422,
        "priority",
        "priority_too_high",
    ),
    ("sendAt in the past", {**email_to(), "sendAt": PAST}, 422, "sendAt", "send_at_in_past"),
    (
        "sendAt without zone",
        {**email_to(), "sendAt": "2030-01-01T10:00:00"},
        422,
        "sendAt",
        "invalid_request",
    ),
    (
        "data too large",
        {**email_to(), "data": {"blob": "x" * 40_000}},
        422,
        "data",
        "data_too_large",
    ),
    ("unknown field", {**email_to(), "colour": "red"}, 422, "colour", "invalid_request"),
    ("wrong type", {**email_to(), "channels": "email"}, 422, "channels", "invalid_request"),
    ("unknown channel", {**email_to(), "channels": ["fax"]}, 422, "channels.0", "invalid_request"),
]


@pytest.mark.parametrize(
    ("case", "body", "status", "field", "code"), CASES, ids=[c[0] for c in CASES]
)
async def test_bad_notification_is_refused_with_the_field(
    client: httpx.AsyncClient,
    case: str,
    body: dict[str, Any],
    status: int,
    field: str | None,
    code: str,
) -> None:
    await put_type(client)
    await put_type(client, "mail.only", channels=("email",))
    response = await post(client, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["field"], error["code"]) == (field, code)
    assert error["message"]


async def test_missing_or_overlong_idempotency_key(client: httpx.AsyncClient) -> None:
    await put_type(client)
    missing = await client.post("/v1/notifications", json=email_to())
    assert missing.status_code == 422
    assert missing.json()["error"]["field"] == "Idempotency-Key"
    long_key = await post(client, email_to(), key="k" * 256)
    assert long_key.status_code == 422
    assert long_key.json()["error"]["field"] == "Idempotency-Key"


async def test_invalid_json_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/notifications",
        content=b"{not json",
        headers={"Idempotency-Key": "k", "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "the request body is not valid JSON"
    # Pydantic locates a syntax error by character offset; that is no field of the request.
    assert response.json()["error"]["field"] is None


async def test_an_empty_body_says_the_body_is_required(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/notifications",
        content=b"",
        headers={"Idempotency-Key": "k", "content-type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "the request body is required"


async def test_body_over_the_limit_is_413(client: httpx.AsyncClient) -> None:
    body = email_to(data={"blob": "x" * 300_000})
    response = await post(client, body)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


async def test_bad_registry_input(client: httpx.AsyncClient) -> None:
    bad_type = {"category": "spam", "priority": "normal", "channels": ["email"]}
    assert (await client.put("/v1/types/x", json=bad_type)).status_code == 422
    good_type = {"category": "marketing", "priority": "low", "channels": ["email"]}
    assert (await client.put("/v1/types/Bad Name!", json=good_type)).status_code == 422
    bad_zone = await client.put("/v1/users/u1", json={"timezone": "Mars/Olympus"})
    assert bad_zone.status_code == 422
    assert bad_zone.json()["error"]["field"] == "timezone"
    bad_device = await client.post(
        "/v1/devices", json={"userId": "u1", "platform": "nokia", "token": "t"}
    )
    assert bad_device.json()["error"]["field"] == "platform"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
notification_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["order.confirmed", "nope", ""]) | st.text(max_size=5),
        "userId": json_values,
        "to": st.fixed_dictionaries(
            {},
            optional={
                "email": json_values,
                "phone": json_values,
                "deviceTokens": json_values,
                "webhookUrl": st.sampled_from(["https://h.example/x", "ftp://x", "nohost"])
                | json_values,
            },
        )
        | json_values,
        "data": json_values,
        "channels": st.lists(st.sampled_from(["email", "sms", "push", "webhook", "fax"]))
        | json_values,
        "priority": st.sampled_from(["high", "normal", "low", "urgent"]) | json_values,
        "sendAt": st.sampled_from([PAST, "2999-01-01T00:00:00Z", "soon"]) | json_values,
        "locale": json_values,
        # template parts
        "subject": st.sampled_from(["{{ x }}", "{{", "{% for %}", "{{ ''.__class__ }}"])
        | json_values,
        "text": st.sampled_from(["{{ x | upper }}", "{% if %}", "{{ x.y }}"]) | json_values,
    },
)
ENDPOINTS = [
    ("POST", "/v1/notifications"),
    ("POST", "/v1/notifications/batch"),
    ("PUT", "/v1/types/t1"),
    ("PUT", "/v1/users/u1"),
    ("POST", "/v1/devices"),
    ("PUT", "/v1/suppressions/email/a@example.com"),
    ("PUT", "/v1/users/u1/preferences"),
    ("PUT", "/v1/templates/order.confirmed/email/en"),
    ("PUT", "/v1/templates/order.confirmed/push/pt-BR"),
    ("POST", "/v1/templates/preview"),
    ("POST", "/v1/webhooks/sendgrid/nope"),
    ("POST", "/v1/webhooks/twilio/nope"),
]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    endpoint=st.sampled_from(ENDPOINTS), body=notification_like | json_values, wrap=st.booleans()
)
async def test_no_input_makes_a_500(
    client: httpx.AsyncClient, endpoint: tuple[str, str], body: Any, wrap: bool
) -> None:
    await put_type(client)
    method, path = endpoint
    if wrap and path.endswith("batch"):
        body = {"notifications": [body]}
    response = await client.request(method, path, json=body, headers={"Idempotency-Key": "fuzz"})
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert (
            {"code", "message", "field"}
            <= set(response.json()["error"])
            <= {"code", "message", "field", "problems"}
        )


async def test_nan_and_infinity_in_data_are_refused(client: httpx.AsyncClient) -> None:
    await put_type(client)
    raw = b'{"type":"order.confirmed","to":{"email":"a@example.com"},"data":{"x":NaN,"y":Infinity}}'
    response = await client.post(
        "/v1/notifications",
        content=raw,
        headers={"Idempotency-Key": "nan", "content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "data"


async def test_unreachable_database_is_503_not_500(tmp_path: Path) -> None:
    from tests.processes import free_port
    from tidings.api.app import create_app
    from tidings.service import Service
    from tidings.settings import Settings

    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    service = Service.from_settings(Settings(database_url=url, outbox_dir=tmp_path))
    transport = httpx.ASGITransport(app=create_app(service))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await post(client, email_to())
            ready = await client.get("/readyz")
    finally:
        await service.close()
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "database_unavailable"
    assert ready.status_code == 503


async def test_a_missing_key_is_reported_with_the_body_errors(client: httpx.AsyncClient) -> None:
    """One answer names every problem: the missing header and the body's own."""
    response = await client.post("/v1/notifications", json={"data": {}, "priority": "urgent"})
    assert response.status_code == 422
    error = response.json()["error"]
    fields = {problem["field"] for problem in error["problems"]}
    assert {"Idempotency-Key", "type", "priority"} <= fields
    assert error["field"] in fields


async def test_a_single_problem_has_no_list(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/notifications", json={"type": "x"})
    error = response.json()["error"]
    assert error["field"] == "Idempotency-Key" and "problems" not in error


async def test_a_validator_message_reads_as_written(client: httpx.AsyncClient) -> None:
    response = await client.put("/v1/users/u1", json={"phone": "+1555\n"})
    message = response.json()["error"]["message"]
    assert message.startswith("phone: phone must be in E.164") and "Value error" not in message
