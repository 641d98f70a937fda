"""Templates (issue 4, item 1): versions, the sandbox, locale fallback, limits, and what
happens at accept and at send when a template is missing or fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import UndefinedError

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.content.locales import fallback_chain
from tidings.content.render import TEXT, compile_part
from tidings.content.sms import segments
from tidings.providers.sink import SinkProvider
from tidings.service import Service

TYPE = "order.confirmed"
EMAIL = {"subject": "Order {{ order }}", "text": "Thanks for order {{ order }}."}


async def put_template(
    client: httpx.AsyncClient, channel: str, locale: str, body: dict[str, Any], type_: str = TYPE
) -> httpx.Response:
    return await client.put(f"/v1/templates/{type_}/{channel}/{locale}", json=body)


async def sent_message(service: Service, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
    """Send ``body`` through the development sink; the one delivery's message and row."""
    response = await post(client, body)
    assert response.status_code == 202, response.text
    notification = response.json()
    delivery_id = notification["deliveries"][0]["id"]
    channel = notification["deliveries"][0]["channel"]
    written = Path(service.settings.outbox_dir) / channel / f"{delivery_id}.json"
    async with running_dispatcher(service, SinkProvider(service.settings.outbox_dir)):
        await eventually(written.exists)
    shown = await eventually(lambda: _settled(client, notification["id"]))
    return json.loads(written.read_text()), shown["deliveries"][0]


async def failed_delivery(service: Service, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
    response = await post(client, body)
    assert response.status_code == 202, response.text
    notification_id = response.json()["id"]
    async with running_dispatcher(service, SinkProvider(service.settings.outbox_dir)):
        shown = await eventually(lambda: _settled(client, notification_id))
    return shown["deliveries"][0]


async def _settled(client: httpx.AsyncClient, notification_id: str) -> Any:
    shown = (await client.get(f"/v1/notifications/{notification_id}")).json()
    done = all(d["status"] in ("SENT", "FAILED") for d in shown["deliveries"])
    return shown if done else None


# Versions and uploads.


async def test_each_upload_is_a_new_version_and_an_equal_one_is_not(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client, TYPE, channels=("email",), templates=False)
    first = await put_template(client, "email", "en", EMAIL)
    assert first.status_code == 201 and first.json()["version"] == 1
    again = await put_template(client, "email", "en", EMAIL)
    assert again.status_code == 200 and again.json()["version"] == 1
    second = await put_template(client, "email", "en", EMAIL | {"subject": "Order #{{ order }}"})
    assert second.status_code == 201 and second.json()["version"] == 2
    listed = (await client.get(f"/v1/templates/{TYPE}/email/en")).json()["versions"]
    assert [v["version"] for v in listed] == [2, 1]
    assert listed[1]["subject"] == "Order {{ order }}"
    latest = (await client.get(f"/v1/templates/{TYPE}")).json()["templates"]
    assert [(t["channel"], t["locale"], t["version"]) for t in latest] == [("email", "en", 2)]


@pytest.mark.parametrize(
    ("channel", "body", "field", "says"),
    [
        ("email", {"text": "no subject"}, "subject", "an email template needs subject"),
        ("email", {"subject": "only a subject"}, "text", "text or html"),
        ("sms", {"subject": "x", "text": "y"}, "subject", "an sms template has no subject"),
        ("push", {"text": "y", "html": "<p>"}, "html", "a push template has no html"),
        ("push", {"text": "y", "data": {"gcm.x": "1"}}, "data", "reserved"),
        ("email", {"subject": "{{ order", "text": "x"}, "subject", "subject:"),
        ("webhook", {"text": "x"}, "channel", None),
    ],
)
async def test_uploads_that_could_never_be_sent_are_refused(
    client: httpx.AsyncClient, channel: str, body: dict[str, Any], field: str, says: str | None
) -> None:
    await put_type(client, TYPE, channels=("email", "sms", "push"), templates=False)
    response = await put_template(client, channel, "en", body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == field
    if says:
        assert says in error["message"]


async def test_a_template_for_an_unknown_type_or_a_channel_the_type_lacks_is_refused(
    client: httpx.AsyncClient,
) -> None:
    assert (await put_template(client, "email", "en", EMAIL, type_="nope")).status_code == 404
    await put_type(client, TYPE, channels=("email",), templates=False)
    response = await put_template(client, "sms", "en", {"text": "hi"})
    assert response.status_code == 422
    assert "does not send on sms" in response.json()["error"]["message"]


# The sandbox.


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ order.__class__ }}",
        "{{ data['__class__'] }}",
        "{% for c in ''.__class__.__mro__[1].__subclasses__() %}{{ c }}{% endfor %}",
        "{{ order | attr('__class__') }}",
        "{{ order | attr('_' ~ '_class_' ~ '_') }}",
        "{{ data['_' ~ '_class__'] }}",
        "{{ [order] | map(attribute='__class__') | list }}",
    ],
)
async def test_a_sandbox_escape_is_refused_at_upload(
    client: httpx.AsyncClient, source: str
) -> None:
    await put_type(client, TYPE, channels=("email",), templates=False)
    response = await put_template(client, "email", "en", {"subject": "x", "text": source})
    assert response.status_code == 422
    assert "'_'" in response.json()["error"]["message"]


async def test_an_escape_hidden_from_upload_fails_as_poison_without_executing(
    service: Service, client: httpx.AsyncClient
) -> None:
    """``attr`` with a name from the data passes the upload check; the sandbox refuses it at
    render time, so the delivery fails as poison and is listed as a dead letter."""
    await put_type(client, TYPE, channels=("email",), templates=False)
    source = "{{ order | attr(prefix ~ 'class__') }}"
    assert (await put_template(client, "email", "en", {"subject": "x", "text": source})).is_success
    data = {"order": 1, "prefix": "__"}
    delivery = await failed_delivery(
        service, client, {"type": TYPE, "to": {"email": "ana@example.com"}, "data": data}
    )
    assert delivery["status"] == "FAILED" and delivery["failureKind"] == "poison"
    assert "template" in delivery["lastError"] and "unsafe" in delivery["lastError"]
    assert not (Path(service.settings.outbox_dir) / "email").exists()  # nothing was sent
    dead = (await client.get("/v1/dead-letters")).json()
    assert [d["id"] for d in dead] == [delivery["id"]]


async def test_a_missing_variable_fails_as_poison_with_the_error(
    service: Service, client: httpx.AsyncClient
) -> None:
    await put_type(client, TYPE, channels=("email",), templates=False)
    await put_template(client, "email", "en", EMAIL)
    delivery = await failed_delivery(
        service, client, {"type": TYPE, "to": {"email": "ana@example.com"}, "data": {}}
    )
    assert delivery["failureKind"] == "poison"
    assert "'order' is undefined" in delivery["lastError"]
    assert delivery["attempts"] == 1


async def test_html_is_escaped_and_text_is_not(service: Service, client: httpx.AsyncClient) -> None:
    await put_type(client, TYPE, channels=("email",), templates=False)
    body = EMAIL | {"html": "<p>Thanks for order {{ order }}</p>"}
    await put_template(client, "email", "en", body)
    message, _ = await sent_message(
        service, client, {"type": TYPE, "to": {"email": "a@example.com"}, "data": {"order": "<b>"}}
    )
    assert message["content"]["html"] == "<p>Thanks for order &lt;b&gt;</p>"
    assert message["content"]["text"] == "Thanks for order <b>."


# Accept: every channel must have a template.


async def test_accept_refuses_a_channel_no_template_serves_and_names_it(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client, TYPE, channels=("email", "sms"), templates=False)
    await put_template(client, "email", "pt", EMAIL)
    body = {
        "type": TYPE,
        "to": {"email": "a@example.com", "phone": "+5511912345678"},
        "locale": "pt-BR",
        "data": {"order": 1},
    }
    response = await post(client, body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "no_template" and "'sms'" in error["message"]
    assert "pt-BR, pt, en" in error["message"]
    # The email alone is servable (pt-BR falls back to pt).
    assert (await post(client, body | {"channels": ["email"]})).status_code == 202


async def test_a_batch_refuses_only_the_items_without_a_template(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client, TYPE, channels=("email", "sms"), templates=False)
    await put_template(client, "email", "en", EMAIL)
    items = [
        {"idempotencyKey": "a", "type": TYPE, "to": {"email": "a@example.com"}, "data": {}},
        {"idempotencyKey": "b", "type": TYPE, "to": {"phone": "+5511912345678"}, "data": {}},
    ]
    response = await client.post("/v1/notifications/batch", json={"notifications": items})
    results = response.json()["results"]
    assert results[0]["status"] == "accepted", results
    assert results[1]["error"]["code"] == "no_template"


# Locale fallback: exact -> language -> the type's default -> en.


def test_the_fallback_chain() -> None:
    assert fallback_chain("pt-BR", "es") == ("pt-BR", "pt", "es", "en")
    assert fallback_chain("pt_br", None) == ("pt-BR", "pt", "en")
    assert fallback_chain(None, "es") == ("es", "en")
    assert fallback_chain("en-GB", "en") == ("en-GB", "en")


@pytest.mark.parametrize(
    ("locale", "available", "default", "used"),
    [
        ("pt-BR", ["pt-BR", "pt", "en"], None, "pt-BR"),
        ("pt-BR", ["pt", "en"], None, "pt"),  # a missing translation falls back to its language
        ("fr-CA", ["es", "en"], "es", "es"),  # then to the type's default locale
        ("fr-CA", ["es", "en"], None, "en"),  # then to en
        (None, ["es", "en"], "es", "es"),
    ],
)
async def test_a_missing_translation_falls_back(
    service: Service,
    client: httpx.AsyncClient,
    locale: str | None,
    available: list[str],
    default: str | None,
    used: str,
) -> None:
    extra = {"defaultLocale": default} if default else {}
    await put_type(client, TYPE, channels=("email",), templates=False, **extra)
    for each in available:
        await put_template(client, "email", each, {"subject": f"[{each}]", "text": "{{ order }}"})
    body: dict[str, Any] = {"type": TYPE, "to": {"email": "a@example.com"}, "data": {"order": 7}}
    if locale:
        body["locale"] = locale
    message, row = await sent_message(service, client, body)
    assert message["content"]["subject"] == f"[{used}]"
    preview = await client.post(
        "/v1/templates/preview", json={"type": TYPE, "locale": locale, "data": {"order": 7}}
    )
    assert preview.json()["channels"]["email"]["locale"] == used
    assert row["templateVersion"] == 1


async def test_the_users_locale_chooses_the_template(
    service: Service, client: httpx.AsyncClient
) -> None:
    await put_type(client, TYPE, channels=("email",), templates=False)
    await put_template(client, "email", "en", {"subject": "Hi {{ user.name }}", "text": "."})
    await put_template(client, "email", "pt", {"subject": "Olá {{ user.name }}", "text": "."})
    user = {"email": "ana@example.com", "locale": "pt-BR", "attributes": {"name": "Ana"}}
    assert (await client.put("/v1/users/ana", json=user)).status_code == 201
    message, _ = await sent_message(service, client, {"type": TYPE, "userId": "ana", "data": {}})
    assert message["content"]["subject"] == "Olá Ana"
    preview = await client.post("/v1/templates/preview", json={"type": TYPE, "userId": "ana"})
    assert preview.json()["channels"]["email"]["subject"] == "Olá Ana"


# Versions recorded per delivery.


async def test_a_delivery_records_the_version_it_was_sent_with(
    service: Service, client: httpx.AsyncClient
) -> None:
    await put_type(client, TYPE, channels=("email",), templates=False)
    await put_template(client, "email", "en", EMAIL)
    body = {"type": TYPE, "to": {"email": "a@example.com"}, "data": {"order": 1}}
    first, first_row = await sent_message(service, client, body)
    await put_template(client, "email", "en", EMAIL | {"subject": "v2 {{ order }}"})
    second, second_row = await sent_message(service, client, body)
    assert (first_row["templateVersion"], second_row["templateVersion"]) == (1, 2)
    assert (first["content"]["subject"], second["content"]["subject"]) == ("Order 1", "v2 1")


async def test_a_marketing_template_can_show_the_unsubscribe_link(
    service: Service, client: httpx.AsyncClient
) -> None:
    await put_type(
        client, "promo", category="marketing", priority="low", channels=("email",), templates=False
    )
    footer = {"subject": "Sale", "text": "Unsubscribe: {{ unsubscribe_url }}"}
    await put_template(client, "email", "en", footer, type_="promo")
    body = {"type": "promo", "to": {"email": "a@example.com"}, "data": {}}
    message, _ = await sent_message(service, client, body)
    assert message["content"]["text"] == f"Unsubscribe: {message['unsubscribe_url']}"
    assert "/u/" in message["unsubscribe_url"]


# SMS segments and the push payload limit.


@pytest.mark.parametrize(
    ("text", "encoding", "count"),
    [
        ("a" * 160, "GSM-7", 1),
        ("a" * 161, "GSM-7", 2),
        ("a" * 306, "GSM-7", 2),
        ("a" * 307, "GSM-7", 3),
        ("€" * 80, "GSM-7", 1),  # an extension character takes two septets
        ("€" * 81, "GSM-7", 2),
        ("ã" * 70, "UCS-2", 1),  # not in GSM 03.38
        ("ã" * 71, "UCS-2", 2),
        ("😀" * 35, "UCS-2", 1),  # two UTF-16 code units each
        ("😀" * 36, "UCS-2", 2),
    ],
)
def test_sms_segments(text: str, encoding: str, count: int) -> None:
    counted = segments(text)
    assert (counted.encoding, counted.count) == (encoding, count)


async def test_an_sms_over_the_segment_limit_fails_as_poison(
    service: Service, client: httpx.AsyncClient
) -> None:
    await put_type(client, TYPE, channels=("sms",), templates=False)
    await put_template(client, "sms", "en", {"text": "{{ body }}"})
    preview = await client.post(
        "/v1/templates/preview", json={"type": TYPE, "data": {"body": "ã" * 100}}
    )
    assert preview.json()["channels"]["sms"]["segments"] == {
        "encoding": "UCS-2",
        "units": 100,
        "count": 2,
    }
    long = {"type": TYPE, "to": {"phone": "+5511912345678"}, "data": {"body": "x" * 1600}}
    delivery = await failed_delivery(service, client, long)
    assert delivery["failureKind"] == "poison"
    assert "11 segments" in delivery["lastError"] and "limit is 10" in delivery["lastError"]


async def test_a_push_payload_over_4_kb_fails_as_poison(
    service: Service, client: httpx.AsyncClient
) -> None:
    await put_type(client, TYPE, channels=("push",), templates=False)
    push = {"subject": "Hi", "text": "{{ body }}", "data": {"order": "{{ order }}"}}
    await put_template(client, "push", "en", push)
    await client.post("/v1/devices", json={"userId": "u", "platform": "ios", "token": "t1"})
    preview = await client.post(
        "/v1/templates/preview", json={"type": TYPE, "data": {"body": "x" * 4000, "order": 1}}
    )
    assert preview.json()["channels"]["push"]["payloadBytes"] > 4000
    body = {"type": TYPE, "userId": "u", "data": {"body": "x" * 4100, "order": 1}}
    delivery = await failed_delivery(service, client, body)
    assert delivery["failureKind"] == "poison" and "4096" in delivery["lastError"]


# What a template sees of the user is built once, for preview and send alike.

USER_WORDS = {"subject": "{{ user | dictsort }}", "text": "{{ locale }} {{ data | dictsort }}"}


@pytest.mark.parametrize("who", ["profile", "user id without a profile", "no user"])
async def test_preview_shows_the_words_a_send_would(
    service: Service, client: httpx.AsyncClient, who: str
) -> None:
    await put_type(client, TYPE, channels=("email",), templates=False)
    await put_template(client, "email", "en", USER_WORDS)
    profile = {
        "email": "ana@example.com",
        "locale": "en-GB",
        "timezone": "Europe/Lisbon",
        "attributes": {"name": "Ana", "tier": "gold"},
    }
    assert (await client.put("/v1/users/ana", json=profile)).status_code == 201
    user = {"profile": {"userId": "ana"}, "user id without a profile": {"userId": "ghost"}}
    recipient = user.get(who, {})
    body = {"type": TYPE, "to": {"email": "x@example.com"}, "data": {"order": 7}, **recipient}
    message, _ = await sent_message(service, client, body)
    preview = await client.post(
        "/v1/templates/preview", json={"type": TYPE, "data": {"order": 7}, **recipient}
    )
    shown = preview.json()["channels"]["email"]
    sent = message["content"]
    assert (shown["subject"], shown["text"]) == (sent["subject"], sent["text"])
    expected = {
        "profile": "[('id', 'ana'), ('locale', 'en-GB'), ('name', 'Ana'), ('tier', 'gold'), "
        "('timezone', 'Europe/Lisbon')]",
        "user id without a profile": "[('id', 'ghost'), ('locale', None), ('timezone', None)]",
        "no user": "[]",
    }
    assert sent["subject"] == expected[who]


async def test_preview_shows_each_channels_error(client: httpx.AsyncClient) -> None:
    await put_type(client, TYPE, channels=("email", "sms"), templates=False)
    await put_template(client, "email", "en", EMAIL)
    response = await client.post("/v1/templates/preview", json={"type": TYPE, "data": {}})
    channels = response.json()["channels"]
    assert "'order' is undefined" in channels["email"]["error"]
    assert "no template" in channels["sms"]["error"]
    missing = await client.post("/v1/templates/preview", json={"type": "nope"})
    assert missing.status_code == 404


# The fast path for plain ``{{ name }}`` templates renders exactly what Jinja2 renders.

_NAMES = st.sampled_from(["order", "name", "total", "missing", "range", "user"])
_TEXT = st.text(alphabet=st.characters(blacklist_characters="{}%#"), max_size=20)
_VALUES = st.one_of(
    st.none(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10), st.just("<b>&")
)


@given(
    pieces=st.lists(st.one_of(_TEXT, _NAMES.map(lambda n: "{{ " + n + " }}")), max_size=8),
    values=st.dictionaries(st.sampled_from(["order", "name", "total", "user"]), _VALUES),
    html=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_plain_templates_render_as_jinja_renders_them(
    pieces: list[str], values: dict[str, Any], html: bool
) -> None:
    source = "".join(pieces)
    part = compile_part("text", source, html=html)
    assert part.pieces is not None  # the fast path is taken
    scope = {**TEXT.globals, **values}
    try:
        expected: str | Exception = part.template.render(scope)
    except UndefinedError as error:
        expected = error
    try:
        got: str | Exception = part.render(scope)
    except UndefinedError as error:
        got = error
    if isinstance(expected, Exception):
        assert isinstance(got, UndefinedError) and str(got) == str(expected)
    else:
        assert got == expected


def test_other_templates_take_jinjas_path() -> None:
    for source in ("{{ a.b }}", "{{ a | upper }}", "{% if a %}x{% endif %}", "{{ 'x' }}"):
        assert compile_part("text", source).pieces is None
