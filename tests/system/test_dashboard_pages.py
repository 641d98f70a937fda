"""The dashboard's pages of issue 29, item 2, beyond the search: a message's rendered words
(subject, text, HTML in a sandboxed frame, SMS segments, push payload) and its cancel, the
last 24 hours' charts, the campaigns and their reports, types, templates with a preview
and webhook endpoints' health; in process on SQLite and PostgreSQL, and in Chromium
(test_dashboard_pages_in_a_real_browser, which saves docs/dashboard-*.png with
UPDATE_SCREENSHOT=1)."""

from __future__ import annotations

import html
import re
import uuid
from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from tests.helpers import eventually, post, running_dispatcher
from tests.system.test_dashboard import add_key, browser, csrf_of, sign_in
from tidings.api.app import create_app
from tidings.clock import utcnow
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.services import notifications

TICKET_TEMPLATES: dict[str, dict[str, Any]] = {
    "email": {
        "subject": "Tickets for {{ show }}",
        "text": "Hi {{ name }}, we wrote to {{ mail }}.",
        "html": "<p>Hi <b>{{ name }}</b></p><script>parent.document.title='owned'</script>",
    },
    "sms": {"text": "Olá {{ name }}, ingressos para {{ show }} ✓"},
    "push": {"subject": "Tickets", "text": "{{ show }} at 10:00", "data": {"show": "{{ show }}"}},
}
DATA = {"show": "Nação Zumbi", "name": "Ana <3", "mail": "ana@example.com"}
TO = {"email": "ana@example.com", "phone": "+5511987654321", "deviceTokens": ["tok-ana-12345678"]}


async def ticket_type(api: httpx.AsyncClient, name: str = "tickets") -> None:
    kind = {"category": "transactional", "priority": "high", "channels": ["email", "sms", "push"]}
    assert (await api.put(f"/v1/types/{name}", json=kind)).status_code in (200, 201)
    for channel, parts in TICKET_TEMPLATES.items():
        response = await api.put(f"/v1/templates/{name}/{channel}/en", json=parts)
        assert response.status_code in (200, 201), response.text


def section(page: str, channel: str) -> str:
    found = re.search(rf'data-content="{channel}">(.*?)</div>', page, re.S)
    assert found is not None, f"no {channel} content"
    return found.group(1)


async def test_a_message_shows_each_deliverys_words_with_its_version(service: Service) -> None:
    app: FastAPI = create_app(service)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as api:
        await ticket_type(api)
        accepted = (await post(api, {"type": "tickets", "to": TO, "data": DATA})).json()
        async with running_dispatcher(service, ScriptedProvider()):
            await eventually(lambda: _all_sent(api, accepted["id"]))
        changed = {**TICKET_TEMPLATES["email"], "subject": "NEW {{ show }}"}
        await api.put("/v1/templates/tickets/email/en", json=changed)
    key = await add_key(app, "viewer", "read")
    async with browser(app) as client:
        await sign_in(client, key)
        page = (await client.get(f"/dashboard/messages/{accepted['id']}")).text
    email = section(page, "email")
    assert "Tickets for Nação Zumbi" in email and "NEW" not in email  # the version sent: 1
    assert "template version 1 (en)" in email
    assert "a***@example.com" in email and "ana@example.com" not in page  # masked everywhere
    frame = re.search(r'<iframe class="html" sandbox="" [^>]*srcdoc="([^"]*)"', email)
    assert frame is not None  # sandboxed, no allow-scripts; the HTML only inside srcdoc
    assert html.unescape(frame.group(1)).startswith("<p>Hi <b>Ana &lt;3</b></p><script>")
    assert "<script>parent" not in page  # escaped: never markup of the page itself
    sms = section(page, "sms")
    assert "1 segment, UCS-2" in sms and "Olá Ana &lt;3" in sms
    push = section(page, "push")
    assert "push payload" in push and "&#34;aps&#34;" in push and "bytes" in push


async def _all_sent(api: httpx.AsyncClient, notification_id: str) -> bool:
    found = (await api.get(f"/v1/notifications/{notification_id}")).json()
    return all(d["status"] == "SENT" for d in found["deliveries"])


async def test_a_scheduled_message_is_cancelled_from_its_page(service: Service) -> None:
    app: FastAPI = create_app(service)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as api:
        await ticket_type(api)
        tomorrow = (utcnow() + timedelta(days=1)).isoformat()
        later = {"type": "tickets", "to": TO, "data": DATA, "sendAt": tomorrow}
        accepted = (await post(api, later)).json()
    path = f"/dashboard/messages/{accepted['id']}"
    viewer, admin = await add_key(app, "viewer", "read"), await add_key(app, "ops", "admin")
    async with browser(app) as client:
        await sign_in(client, viewer)
        shown = await client.get(path)
        assert 'id="cancel"' not in shown.text  # a read key sees no cancel
        refused = await client.post(f"{path}/cancel", data={"csrf": await csrf_of(client, path)})
        assert refused.status_code == 403
    async with browser(app) as client:
        await sign_in(client, admin)
        token = await csrf_of(client, path)
        assert 'id="cancel"' in (await client.get(path)).text
        forged = await client.post(f"{path}/cancel", data={"csrf": "0" * 64})
        assert forged.status_code == 403
        done = await client.post(f"{path}/cancel", data={"csrf": token})
        assert done.status_code == 303
        page = (await client.get(done.headers["location"])).text
        assert "Cancelled 3 deliveries" in page and 'data-kind="cancelled"' in page
        assert 'id="cancel"' not in page  # nothing left to cancel
        again = await client.post(f"{path}/cancel", data={"csrf": token})
        assert "Nothing was cancelled" in (await client.get(again.headers["location"])).text
        other = "/dashboard/messages/01a230d8-86f3-75e2-8dfa-aade46dbfad9/cancel"
        assert (await client.post(other, data={"csrf": token})).status_code == 404
    found = await notifications.get_notification(service.db, uuid.UUID(accepted["id"]), "default")
    assert found is not None and {d.status for d in found.deliveries} == {"CANCELLED"}
