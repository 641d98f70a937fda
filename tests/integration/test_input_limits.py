"""Every input the API takes is bounded: a violation is a 4xx naming the field, never a 500,
and never harms the other requests committed with it (docs/limits.md)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import email_to, post, put_type
from tidings.api.text_guard import bad_text_path, may_hold_bad_text
from tidings.content.locales import fallback_chain
from tidings.intake.accept import Submission, accept
from tidings.intake.drafts import ItemError
from tidings.intake.requests import NotificationIn
from tidings.providers.sendgrid.signature import EventWebhookSigner, EventWebhookVerifier
from tidings.service import Service
from tidings.store.intake import Accepted

TYPE = {"category": "transactional", "priority": "normal", "channels": ["email", "sms"]}


async def _send(
    client: httpx.AsyncClient, method: str, url: str, body: Any, key: str | None = "k"
) -> httpx.Response:
    """``body`` as ASCII JSON: httpx's own encoding cannot carry a lone surrogate."""
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return await client.request(method, url, content=json.dumps(body).encode(), headers=headers)


def _error(response: httpx.Response) -> tuple[int, str | None, str]:
    error = response.json()["error"]
    return response.status_code, error["field"], error["code"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ttl": 1_000_000_000_000_000_000}, "ttl"),
        ({"ttl": 30 * 24 * 3600 + 1}, "ttl"),
        ({"retry": {"maxAttempts": 2**40}}, "retry.maxAttempts"),
        ({"retry": {"baseDelay": 1e300}}, "retry.baseDelay"),
        ({"retry": {"baseDelay": 10, "maxDelay": 5}}, "retry.maxDelay"),
        ({"requiredChannels": ["push"]}, "requiredChannels"),
        ({"defaultLocale": "en-" + "-".join(["abcdefgh"] * 4)}, "defaultLocale"),
    ],
)
async def test_type_numbers_and_channels_are_bounded(
    client: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    response = await client.put("/v1/types/x", json=TYPE | change)
    assert _error(response) == (422, field, "invalid_request"), response.text


async def test_the_longest_ttl_is_accepted(client: httpx.AsyncClient) -> None:
    response = await client.put("/v1/types/x", json=TYPE | {"ttl": 30 * 24 * 3600})
    assert response.status_code < 300, response.text


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"to": {"phone": "+15559990000\n"}, "channels": ["sms"]}, "to.phone"),
        (
            {"to": {"phone": "+1\u0663\u0663\u0663\u0663\u0663\u0663\u0663"}, "channels": ["sms"]},
            "to.phone",
        ),
        ({"to": {"email": "ana@example.com\n"}}, "to.email"),
        ({"locale": "en\n"}, "locale"),
        ({"locale": "en-" + "-".join(["abcdefgh"] * 4)}, "locale"),  # 38 > 35
        ({"sendAt": "9999-12-31T23:59:59-14:00"}, "sendAt"),
        ({"sendAt": "2099-01-01T00:00:00Z"}, "sendAt"),
        ({"data": {"x": "\u0000"}}, "data.x"),
        ({"data": {"a": [1, {"b": "\ud800"}]}}, "data.a.1.b"),
    ],
)
async def test_bad_notification_fields_are_named(
    client: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    await put_type(client, channels=("email", "sms"))
    response = await _send(client, "POST", "/v1/notifications", email_to() | change)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


async def test_nesting_is_bounded(client: httpx.AsyncClient) -> None:
    await put_type(client)
    deep: Any = "x"
    for _ in range(40):
        deep = {"k": deep}
    response = await post(client, email_to(data=deep))
    assert _error(response) == (422, "data", "invalid_data"), response.text
    user = await client.put("/v1/users/u1", json={"attributes": deep})
    assert _error(user) == (422, "attributes", "invalid_request"), user.text
    # Deeper than any JSON parser recurses: the batch parser's fallback used to hit
    # RecursionError (500).
    nested = b'{"notifications": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
    batch = await client.post(
        "/v1/notifications/batch", content=nested, headers={"content-type": "application/json"}
    )
    assert batch.status_code == 400, batch.text


async def test_nul_and_lone_surrogates_are_refused_everywhere(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client)
    item = b'{"type": "order.confirmed", "idempotencyKey": "k", "data": {"x": "\\u0000"}}'
    raw = b'{"notifications": [' + item + b"]}"
    batch = await client.post(
        "/v1/notifications/batch", content=raw, headers={"content-type": "application/json"}
    )
    [result] = batch.json()["results"]
    assert result["status"] == "error", batch.text
    assert (result["error"]["field"], result["error"]["code"]) == ("data.x", "invalid_text")
    template = await client.put(
        "/v1/templates/order.confirmed/email/en", json={"subject": "a\u0000", "text": "b"}
    )
    assert _error(template) == (422, "subject", "invalid_text")
    user = await _send(client, "PUT", "/v1/users/u1", {"attributes": {"nick": "\ud83d"}})
    assert _error(user) == (422, "attributes.nick", "invalid_text")
    device = await client.post(
        "/v1/devices", json={"userId": "u1", "platform": "ios", "token": "ab\u0000"}
    )
    assert _error(device) == (422, "token", "invalid_text"), device.text
    path = await client.put("/v1/users/%00", json={})
    assert _error(path) == (400, "path", "invalid_text")
    key = await post(client, email_to(), key="k\u0000")
    assert key.status_code in (400, 422), key.text
    # A valid surrogate pair (an emoji, escaped) is text like any other.
    emoji = await _send(client, "POST", "/v1/notifications", email_to(data={"x": "\ud83d\ude00"}))
    assert emoji.status_code == 202, emoji.text


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/a\r\nX-Injected: 1",
        "https://hooks.example.com:99999/a",
        "https://hooks exa.example.com/a",
        "https://hooks.example.com/a b",
    ],
)
async def test_webhook_urls_that_cannot_be_sent_to_are_refused(
    client: httpx.AsyncClient, url: str
) -> None:
    await put_type(client, channels=("webhook",), templates=False)
    response = await post(client, {"type": "order.confirmed", "to": {"webhookUrl": url}})
    assert _error(response) == (422, "to.webhookUrl", "invalid_request"), response.text


async def test_an_unknown_user_is_named_not_called_addressless(client: httpx.AsyncClient) -> None:
    await put_type(client)
    unknown = await post(client, {"type": "order.confirmed", "userId": "nobody"})
    assert _error(unknown) == (422, "userId", "unknown_user"), unknown.text
    assert "nobody" in unknown.json()["error"]["message"]
    await client.put("/v1/users/known", json={"timezone": "UTC"})
    known = await post(client, {"type": "order.confirmed", "userId": "known"})
    assert _error(known) == (422, "to", "no_address"), known.text


async def test_caller_strings_do_not_grow_the_locale_cache(client: httpx.AsyncClient) -> None:
    await put_type(client)
    before = fallback_chain.cache_info().currsize
    for i in range(30):
        locale = "en-" + "-".join(f"x{i:06d}" for _ in range(2_000))  # 16 kB each
        response = await post(client, email_to(locale=locale))
        assert response.status_code == 422, response.text
    assert fallback_chain.cache_info().currsize == before


def test_a_huge_sendgrid_timestamp_is_refused_not_parsed() -> None:
    signer = EventWebhookSigner()
    verifier = EventWebhookVerifier(signer.public_key)
    body = b"[]"
    headers = signer.sign(body)
    assert not verifier.verify(body, next(iter(headers.values())), "9" * 5_000)


async def test_a_value_the_database_refuses_fails_only_its_notification(
    client: httpx.AsyncClient, service: Service
) -> None:
    """The net under the API's checks: a sendAt that does not convert to UTC (built past the
    schema's check, as a caller of accept() could) fails in the insert; accept() retries in
    halves, so the other notifications of the group are accepted."""
    await put_type(client)
    items = [
        Submission(
            f"k{i}",
            NotificationIn.model_validate(email_to(f"u{i}@example.com", data={"i": i})),
            "default",
        )
        for i in range(11)
    ]
    far = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-14)))
    items[6] = Submission("k6", items[6].request.model_copy(update={"send_at": far}), "default")
    results = await accept(service, items)
    assert isinstance(results[6], ItemError), results[6]
    assert (results[6].code, results[6].status_code) == ("unstorable", 422)
    assert all(isinstance(r, Accepted) for i, r in enumerate(results) if i != 6)


def test_regex_checks_match_the_whole_value() -> None:
    """pydantic's ``pattern=`` runs on Rust's regex, where "$" is the end of the text."""
    from pydantic import ValidationError

    from tidings.api.schemas import PreferencesIn, TypeIn

    for bad in ({"quietHours": {"from": "07:00\n", "to": "08:00"}}, {"locale": "pt-BR\n"}):
        with pytest.raises(ValidationError):
            PreferencesIn.model_validate(bad)
    with pytest.raises(ValidationError):
        TypeIn.model_validate({**TYPE, "defaultLocale": "en\n"})
    json.dumps(PreferencesIn.model_validate({"locale": "pt-BR"}).model_dump())


def test_the_simulators_check_whole_values_too() -> None:
    """The simulators stand in for the providers' own checks: a trailing newline is refused
    there as the real services refuse it."""
    from tidings.simulator.twilio import api as twilio

    form = {"To": "+15559990000\n", "From": "+15005550006", "Body": "hi"}
    assert twilio._invalid(form) == 21211
    assert twilio._invalid(form | {"To": "+15559990000"}) is None


_storable = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=5
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _storable,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_storable, inner, max_size=3),
    max_leaves=10,
)


@given(document=_json, bad=st.sampled_from(["\x00", "\ud800", "\udfff"]))
def test_the_text_guard_finds_bad_text_at_any_depth(document: Any, bad: str) -> None:
    assert bad_text_path(document) is None
    wrapped = {"a": [document, {"b": f"x{bad}"}]}
    assert bad_text_path(wrapped) == "a.1.b"
    assert may_hold_bad_text(json.dumps(wrapped).encode())
