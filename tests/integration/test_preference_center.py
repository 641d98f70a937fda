"""The preference center (docs/inbox.md): GET /p/{token}, a page signed per user, and its
form's POST, protected by a nonce bound to the link."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from tests.helpers import eventually, post, put_type, running_dispatcher
from tests.integration.test_inbox_channel import register, statuses
from tidings.policy.preference_links import PreferenceLinks
from tidings.policy.unsubscribe import Unsubscribe, load_secret
from tidings.providers.sink import SinkProvider
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service

NONCE = re.compile(r'name="csrf" value="([^"]+)"')


async def marketing_type(client: httpx.AsyncClient, name: str = "promo") -> None:
    await put_type(client, name, category="marketing", priority="low", channels=("email", "push"))


def link(service: Service, user: str = "ana") -> str:
    """A new link (each second makes another token: a form's nonce is bound to its own)."""
    return f"/p/{service.preference_links.token(user)}"


async def form_of(client: httpx.AsyncClient, url: str, **headers: str) -> tuple[str, str]:
    """The page's HTML and its form's nonce."""
    page = await client.get(url, headers=headers)
    assert page.status_code == 200, page.text
    found = NONCE.search(page.text)
    assert found is not None
    return page.text, found.group(1)


async def shown(client: httpx.AsyncClient, user: str = "ana") -> dict[str, Any]:
    answer: dict[str, Any] = (await client.get(f"/v1/users/{user}/preferences")).json()
    return answer


def everything_on(nonce: str, **profile: str) -> dict[str, Any]:
    """A form as the page posts it with every switch ticked."""
    on = [f"{c}.{ch}" for c in ("reminder", "marketing") for ch in ("email", "push")]
    return {"csrf": nonce, "on": on, "quiet_from": "", "quiet_to": "", **profile}


async def test_the_page_speaks_the_users_locale_else_the_browsers(
    client: httpx.AsyncClient, service: Service
) -> None:
    await marketing_type(client)
    await register(client, "ana", locale="pt-BR")
    await register(client, "eva", locale="es")
    await register(client, "bob")
    pages = {
        "ana": ("pt-BR", "Suas preferências de notificação", {"accept-language": "es"}),
        "eva": ("es", "Tus preferencias de notificación", {}),
        "bob": ("es", "Tus preferencias de notificación", {"accept-language": "fr, es-MX;q=0.8"}),
    }
    for user, (lang, title, headers) in pages.items():
        page = await client.get(link(service, user), headers=headers)
        assert page.status_code == 200
        assert f'<html lang="{lang}">' in page.text and title in page.text, user
    english = await client.get(link(service, "bob"), headers={"accept-language": "de"})
    assert '<html lang="en">' in english.text
    assert "Your notification preferences" in english.text
    # Switches for the channels the service sends on, with the user's choices.
    assert 'name="on" value="marketing.email" checked' in english.text
    assert english.headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in english.headers["content-security-policy"]
    assert "<script" not in english.text  # a plain form: it works without JavaScript


async def test_required_channels_are_locked_with_why(
    client: httpx.AsyncClient, service: Service
) -> None:
    url = link(service)
    await put_type(client, "receipt", channels=("email",))
    await register(client, "ana")
    page, nonce = await form_of(client, url)
    assert 'value="transactional.email"' not in page
    assert "checked disabled" in page and "messages about your account must reach you" in page
    # A locked switch cannot be posted off, nor on: the page never sends it.
    form = {"csrf": nonce, "on": ["transactional.email"]}
    refused = await client.post(url, data=form)
    assert refused.status_code == 400 and "this form could not be read" in refused.text


async def test_the_form_changes_the_preferences(
    client: httpx.AsyncClient, service: Service
) -> None:
    url = link(service)
    await marketing_type(client)
    await register(client, "ana", locale="en")
    # A choice on a channel the page does not show (no type sends SMS) is kept.
    await client.put("/v1/users/ana/preferences", json={"marketing": {"sms": False}})
    _, nonce = await form_of(client, url)
    form = everything_on(nonce, quiet_from="22:00", quiet_to="07:30")
    form["on"].remove("marketing.email")
    form |= {"timezone": "America/Sao_Paulo", "locale": "es"}
    saved = await client.post(url, data=form)
    assert saved.status_code == 200 and "Tus preferencias se guardaron." in saved.text
    after = await shown(client)
    marketing = after["categories"]["marketing"]
    assert (marketing["email"], marketing["sms"], marketing["push"]) == (False, False, True)
    assert after["quietHours"] == {"from": "22:00", "to": "07:30"}
    assert (after["timezone"], after["locale"]) == ("America/Sao_Paulo", "es")
    # Ticking it again switches it on; empty quiet hours and settings clear them.
    _, nonce = await form_of(client, url)
    assert (await client.post(url, data=everything_on(nonce))).status_code == 200
    after = await shown(client)
    assert after["categories"]["marketing"]["email"] is True
    assert (after["quietHours"], after["timezone"], after["locale"]) == (None, None, None)


async def test_a_post_without_the_pages_nonce_is_forbidden(
    client: httpx.AsyncClient, service: Service
) -> None:
    url = link(service)
    await marketing_type(client)
    await register(client, "ana")
    await register(client, "eve")
    before = await shown(client)
    _, eves = await form_of(client, link(service, "eve"))
    _, anas = await form_of(client, url)
    altered = anas[:-2] + ("AA" if anas[-2:] != "AA" else "BB")
    for nonce in (None, "", "forged", altered, eves, service.preference_links.token("ana")):
        form = everything_on(nonce or "")
        form["on"].remove("marketing.email")
        if nonce is None:
            del form["csrf"]
        refused = await client.post(url, data=form)
        assert refused.status_code == 403, nonce
        assert "This form is too old or did not come from this page" in refused.text
    assert await shown(client) == before


async def test_forged_expired_or_orphan_links_get_a_clear_page(
    client: httpx.AsyncClient, service: Service
) -> None:
    await register(client, "ana")
    token = service.preference_links.token("ana")
    altered = token[:-1] + ("A" if token[-1] != "A" else "B")
    other = PreferenceLinks("another-secret", "http://x", 90).token("ana")
    unsubscribe = service.unsubscriber.token(Unsubscribe("marketing", "email", "ana"))
    for bad in (altered, other, unsubscribe, "x" * 2000, "<script>alert(1)</script>"):
        for method in ("GET", "POST"):
            page = await client.request(method, f"/p/{bad}")
            assert page.status_code in (400, 404), (bad, method)  # 404: not a /p/ path at all
            assert "<script>" not in page.text
            if page.status_code == 400:
                assert "This preferences link is not valid or was altered." in page.text
    expired = await client.get(f"/p/{old_token(service, 'ana', days=91)}")
    assert expired.status_code == 410 and "This preferences link has expired" in expired.text
    fresh = await client.get(f"/p/{old_token(service, 'ana', days=89)}")
    assert fresh.status_code == 200
    nobody = await client.get(link(service, "nobody"), headers={"accept-language": "pt-BR"})
    assert nobody.status_code == 404 and "Não há mais preferências" in nobody.text


def old_token(service: Service, user: str, days: int) -> str:
    """A link made ``days`` ago, as the service would have made it then."""

    class Then(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - days * 86400

    secret = load_secret(service.settings.secret_key, service.settings.secret_file)
    signing = {"digest_method": hashlib.sha256}
    then = URLSafeTimedSerializer(
        secret, salt="tidings.preferences", signer=Then, signer_kwargs=signing
    )
    return then.dumps(user)


async def test_bad_fields_are_refused_and_nothing_is_saved(
    client: httpx.AsyncClient, service: Service
) -> None:
    url = link(service)
    await marketing_type(client)
    await register(client, "ana")
    before = await shown(client)
    cases = {
        "give both times of the quiet hours": {"quiet_from": "22:00"},
        "different from each other": {"quiet_from": "22:00", "quiet_to": "22:00"},
        "choose a time zone": {"timezone": "Mars/Olympus"},
        "choose a language": {"locale": "<b>"},
        "could not be read": {"timezone": "Europe/" + "x" * 200},
    }
    for words, fields in cases.items():
        _, nonce = await form_of(client, url)
        form = everything_on(nonce) | fields
        form["on"].remove("marketing.push")
        refused = await client.post(url, data=form)
        assert refused.status_code == 400, fields
        assert words in refused.text and "&lt;b&gt;" not in refused.text
    _, nonce = await form_of(client, url)
    many = everything_on(nonce) | {f"f{n}": "x" for n in range(100)}
    assert (await client.post(url, data=many)).status_code == 400
    assert await shown(client) == before


async def test_a_change_applies_to_what_is_already_queued(
    client: httpx.AsyncClient, service: Service
) -> None:
    url = link(service)
    await marketing_type(client)
    await register(client, "ana", email="ana@example.com")
    queued = await post(client, {"type": "promo", "userId": "ana", "channels": ["email"]})
    assert queued.json()["deliveries"][0]["status"] == "PENDING"
    _, nonce = await form_of(client, url)
    form = everything_on(nonce)
    form["on"].remove("marketing.email")
    assert (await client.post(url, data=form)).status_code == 200
    async with running_dispatcher(service, ScriptedProvider()):
        done = await eventually(lambda: _skipped(client, queued.json()["id"]))
    assert done == {"email": "SKIPPED"}


async def _skipped(client: httpx.AsyncClient, notification: str) -> dict[str, str] | None:
    found = await statuses(client, notification)
    return found if found.get("email") == "SKIPPED" else None


async def test_templates_have_the_users_preferences_url_and_unsubscribe_leads_there(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "receipt", channels=("email",), templates=False)
    template = {"subject": "Receipt", "text": "Settings: {{ preferences_url }}"}
    await client.put("/v1/templates/receipt/email/en", json=template)
    await register(client, "ana", email="ana@example.com")
    accepted = (await post(client, {"type": "receipt", "userId": "ana"})).json()
    delivery = accepted["deliveries"][0]["id"]
    written = Path(service.settings.outbox_dir) / "email" / f"{delivery}.json"
    async with running_dispatcher(service, SinkProvider(service.settings.outbox_dir)):
        await eventually(written.exists)
    text = json.loads(written.read_text())["content"]["text"]
    url = text.removeprefix("Settings: ")
    assert url.startswith(f"{service.settings.public_url}/p/")
    assert (await client.get(url.removeprefix(service.settings.public_url))).status_code == 200
    # The unsubscribe page, before and after, leads to the user's preference center.
    unsubscribe = service.unsubscriber.token(Unsubscribe("marketing", "email", "ana"))
    for method in ("GET", "POST"):
        page = (await client.request(method, f"/u/{unsubscribe}")).text
        found = re.search(r'href="(/p/[^"]+)"', page)
        assert found is not None and "Manage all your notification preferences" in page
        assert (await client.get(found.group(1))).status_code == 200
