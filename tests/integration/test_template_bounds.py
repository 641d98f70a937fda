"""No template can freeze or crash the service (issue defect 4), and preview shows the newest
version (defect 8).

Hostile templates: what can be judged by reading is refused at upload (422); the rest fails
at render time as poison, at once, while ``/healthz`` and other deliveries carry on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tests.helpers import eventually, put_type
from tidings.api.app import create_app
from tidings.content.render import RenderError, TemplateRejected, compile_part, compile_row
from tidings.service import Service

# Refused at upload: each would always be over a bound or reach Python internals.
STATIC = {
    "constant power tower": "{{ 9 ** (9 ** 8) }}",
    "constant tower in a bigger expression": "{{ (n ** (9 ** (9 ** 8))) % 7 }}",
    "constant string repeat": "{{ 'x' * 10 ** 10 }}",
    "constant list repeat": "{{ [1, 2] * 10 ** 9 }}",
    "constant huge range": "{% for i in range(10 ** 9) %}x{% endfor %}",
    "attr with a private name": "{{ n | attr('__class__') }}",
    "attr with a constant private name": "{{ n | attr('_' ~ '_class_' ~ '_') }}",
    "private attribute for map": "{{ [n] | map(attribute='__class__') | list }}",
    "200 nested parentheses": "{{ " + "(" * 200 + "1" + ")" * 200 + " }}",
    "too many nodes to compile quickly": "{{ n }}," * 1500,
}

# Over a bound only for some data, or only once running: a render error, never a 500.
RUNTIME = {
    "power tower": ("{{ (n ** (n ** m)) % 7 }}", "bits"),
    "recursive macro": ("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(n) }}", "macros nested"),
    "huge loops": (
        "{% for i in range(n * 10000) %}{% for j in range(n * 10000) %}{% endfor %}{% endfor %}",
        "longer than",
    ),
    "huge output": (
        "{% for i in range(n * 10000) %}{{ s }}{% endfor %}",
        "longer than",  # the output cap or the deadline, whichever comes first
    ),
    "string repeat": ("{{ s * (n ** m) }}", "characters"),
    "string doubling": (
        "{% set ns = namespace(s=s) %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s | length }}",
        "characters",
    ),
    "list nested in itself": (
        "{% set ns = namespace(a=[1]) %}{% for i in range(60) %}{% set ns.a = [ns.a, ns.a] %}"
        "{% endfor %}{{ ns.a == ns.a }}",
        "characters",
    ),
    "format width": ("{{ '{:>{}}'.format(1, n ** m) }}", "nested format"),
    "padding": ("{{ s.ljust(n ** m) }}", "characters"),
    "join of joins": ("{{ range(99999) | join(range(99999) | join(s)) }}", "characters"),
    "doubling macro": (
        "{% macro m(x) %}{{ x }}{{ x }}{% endmacro %}" + "{{ " + "m(" * 30 + "s" + ")" * 30 + " }}",
        "characters",
    ),
}
DATA = {"n": 9, "m": 8, "s": "x" * 100}
TYPE = "hostile"


def test_what_can_be_judged_by_reading_is_refused_at_compile_time() -> None:
    for name, source in STATIC.items():
        started = time.monotonic()
        with pytest.raises(TemplateRejected):
            compile_part("text", source)
        assert time.monotonic() - started < 1, name


def test_each_runtime_bound_fails_as_a_render_error() -> None:
    for name, (source, error) in RUNTIME.items():
        row = {"id": 1, "type": TYPE, "channel": "sms", "locale": "en", "version": 1}
        template = compile_row(row | {"text": source})
        started = time.monotonic()
        with pytest.raises(RenderError, match=error):
            template.render(DATA)
        assert time.monotonic() - started < 5, name


BENIGN = [
    "{% for item in items %}{{ loop.index }}. {{ item.name | title }} x{{ item.qty }}\n"
    "{% endfor %}",
    "{{ items | map(attribute='name') | join(', ') }} ({{ items | length }})",
    "{{ '%s has %d items' % (user, items | length) }} {{ '{} / {:>5}'.format(user, 3) }}",
    "{% macro row(i) %}<{{ i.name }}>{% endmacro %}{% for i in items %}{{ row(i) }}{% endfor %}",
    "{{ (total * 1.1) | round(2) }} {{ total ** 2 }} {{ total // 3 }} {{ 'ab' * 3 }}",
    "{{ user ~ ': ' ~ items[0].name }} {{ [1, 2] + [3] }} {{ {'a': 1} }} {{ (1, 2) }}",
    "{{ user.center(11, '*') }} {{ user.replace('a', 'o') }} {{ ', '.join(['x', 'y']) }}",
    "{% set ns = namespace(n=0) %}{% for i in items %}{% set ns.n = ns.n + i.qty %}{% endfor %}"
    "{{ ns.n }} {{ items | sum(attribute='qty') }} {{ range(3) | list }}",
    "{{ user | indent(2) }}{{ 'a b c' | wordwrap(3) }}{{ 'x' | center(5) }}{{ user | e }}",
]


@pytest.mark.parametrize("source", BENIGN)
@pytest.mark.parametrize("html", [False, True])
def test_ordinary_templates_render_as_jinjas_sandbox_renders_them(source: str, html: bool) -> None:
    data = {
        "user": "Ana <&>",
        "total": 41.5,
        "items": [{"name": "tea", "qty": 2}, {"name": "<cup>", "qty": 1}],
    }
    jinja = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=html)
    row = {"id": 1, "type": TYPE, "channel": "email", "locale": "en", "version": 1}
    part = "html" if html else "text"
    template = compile_row(row | {"subject": "s", part: source})
    rendered = template.render(data)
    assert getattr(rendered, part) == jinja.from_string(source).render(data)


def test_a_stored_template_refused_by_todays_checks_fails_when_rendered() -> None:
    row = {"id": 1, "type": TYPE, "channel": "sms", "locale": "en", "version": 1}
    template = compile_row(row | {"text": STATIC["attr with a private name"]})
    with pytest.raises(RenderError, match="'_'"):
        template.render(DATA)


@pytest.mark.parametrize("name", sorted(STATIC))
async def test_hostile_uploads_are_refused_with_422(client: httpx.AsyncClient, name: str) -> None:
    await put_type(client, TYPE, channels=("sms",), templates=False)
    response = await client.put(f"/v1/templates/{TYPE}/sms/en", json={"text": STATIC[name]})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_template"
    assert response.json()["error"]["field"] == "text"


async def test_preview_shows_a_runtime_bound_as_the_channels_error(
    client: httpx.AsyncClient,
) -> None:
    for index, (source, error) in enumerate(RUNTIME.values()):
        kind = f"{TYPE}.{index}"
        await put_type(client, kind, channels=("sms", "email"), templates=False)
        response = await client.put(f"/v1/templates/{kind}/sms/en", json={"text": source})
        assert response.status_code == 201, response.text
        body = {"subject": "Hi {{ n }}", "text": "n is {{ n }}"}
        assert (await client.put(f"/v1/templates/{kind}/email/en", json=body)).is_success
        preview = await client.post("/v1/templates/preview", json={"type": kind, "data": DATA})
        assert preview.status_code == 200, preview.text
        channels = preview.json()["channels"]
        assert error in channels["sms"]["error"], (source, channels["sms"])
        assert channels["email"]["text"] == "n is 9"  # the other channel is unaffected


# Preview shows the newest version.


async def test_preview_shows_the_newest_version_after_uploads(client: httpx.AsyncClient) -> None:
    await put_type(client, TYPE, channels=("sms",), templates=False)
    url = f"/v1/templates/{TYPE}/sms/en"
    body = {"type": TYPE, "data": {}, "channels": ["sms"]}
    assert (await client.put(url, json={"text": "version one"})).status_code == 201
    first = (await client.post("/v1/templates/preview", json=body)).json()["channels"]["sms"]
    assert (first["version"], first["text"]) == (1, "version one")
    assert (await client.put(url, json={"text": "version two"})).status_code == 201
    assert (await client.put(url, json={"text": "version three"})).status_code == 201
    newest = (await client.post("/v1/templates/preview", json=body)).json()["channels"]["sms"]
    assert (newest["version"], newest["text"]) == (3, "version three")


async def test_another_api_process_previews_the_newest_version_promptly(
    service: Service, client: httpx.AsyncClient
) -> None:
    """Two services on one database, as two ``tidings api`` processes are."""
    other = Service.from_settings(service.settings)
    transport = httpx.ASGITransport(app=create_app(other))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://other") as elsewhere:
            await put_type(client, TYPE, channels=("sms",), templates=False)
            url = f"/v1/templates/{TYPE}/sms/en"
            body = {"type": TYPE, "data": {}, "channels": ["sms"]}
            assert (await client.put(url, json={"text": "version one"})).status_code == 201
            shown = await elsewhere.post("/v1/templates/preview", json=body)
            assert shown.json()["channels"]["sms"]["version"] == 1
            assert (await client.put(url, json={"text": "version two"})).status_code == 201
            started = time.monotonic()

            async def shows_version_two() -> bool:
                shown = await elsewhere.post("/v1/templates/preview", json=body)
                return bool(shown.json()["channels"]["sms"]["version"] == 2)

            await eventually(shows_version_two, within=10, interval=0.1)
            assert time.monotonic() - started < other.templates.max_age + 2
    finally:
        await other.close()


# The acceptance test: a real server, hostile deliveries and previews, /healthz polled.


async def _upload_hostile_types(client: httpx.AsyncClient) -> list[str]:
    kinds = []
    for index, (source, _) in enumerate(RUNTIME.values()):
        kind = f"{TYPE}.{index}"
        await put_type(client, kind, channels=("sms",), templates=False)
        response = await client.put(f"/v1/templates/{kind}/sms/en", json={"text": source})
        assert response.status_code == 201, response.text
        kinds.append(kind)
    await put_type(client, "order.confirmed", channels=("sms",), templates=False)
    loop = "{% for item in items %}{{ item | upper }} {% endfor %}"
    response = await client.put("/v1/templates/order.confirmed/sms/en", json={"text": loop})
    assert response.status_code == 201, response.text
    return kinds


async def _send_everything(
    client: httpx.AsyncClient, kinds: list[str]
) -> tuple[list[str], str, list[httpx.Response]]:
    """Every hostile type sent and previewed at once, with one ordinary notification."""

    async def send(kind: str, data: dict[str, Any], key: str) -> str:
        body = {"type": kind, "to": {"phone": "+15551234567"}, "data": data}
        response = await client.post(
            "/v1/notifications", json=body, headers={"Idempotency-Key": key}
        )
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    async def preview(kind: str) -> httpx.Response:
        return await client.post("/v1/templates/preview", json={"type": kind, "data": DATA})

    hostile = [send(kind, DATA, f"hostile-{kind}") for kind in kinds]
    normal = send("order.confirmed", {"items": ["a", "b"]}, "normal")
    previews = [preview(kind) for kind in kinds]
    sent = await asyncio.gather(*hostile, normal)
    shown = await asyncio.gather(*previews)
    return list(sent[:-1]), sent[-1], list(shown)


async def _all_settled(client: httpx.AsyncClient, ids: list[str]) -> dict[str, Any] | None:
    settled = {}
    for notification_id in ids:
        shown = (await client.get(f"/v1/notifications/{notification_id}")).json()
        delivery = shown["deliveries"][0]
        if delivery["status"] not in ("SENT", "FAILED"):
            return None
        settled[notification_id] = delivery
    return settled


def test_the_render_deadline_raises_only_in_render_code() -> None:
    """A garbage collector's weakref callback can run inside a render: the deadline must not
    raise there (the exception would be lost as "ignored" and the render go on)."""
    import time

    from tidings.content.render import _deadline
    from tidings.content.sandbox import Expired
    from tidings.content.sms import segments

    def callback() -> int:  # code outside the renderer, as a weakref callback is
        return 1

    with _deadline(0.0):
        time.sleep(0.002)
        assert callback() == 1
        with pytest.raises(Expired):
            segments("render code: the deadline raises here")
