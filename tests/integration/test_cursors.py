"""Page cursors (``after``) are the caller's text: whatever it holds, a crafted cursor is a
422 naming ``after`` (never a 500), and a cursor past the end of the event log is an empty
page, on both databases."""

from __future__ import annotations

import base64
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service

FUZZ: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture],
}
LISTS = ("/v1/events", "/v1/campaigns")


def b64(text: str, padded: bool = False) -> str:
    encoded = base64.urlsafe_b64encode(text.encode()).decode()
    return encoded if padded else encoded.rstrip("=")


def refused_as_after(response: httpx.Response) -> bool:
    return response.status_code == 422 and response.json()["error"]["field"] == "after"


CRAFTED_EVENT_CURSORS = (
    "1.99999999999999999999",  # an id past BIGINT
    f"{2**63}.1",  # a txid past BIGINT
    f"1.{2**63}",
    "-1.5",
    "1.+5",
    "1. 5",
    "1_0.5",
    "1.2.3",
    "1",
    "\u0661.\u0662",  # Arabic-Indic digits: int() takes them
)
CRAFTED_CAMPAIGN_CURSORS = (
    "2024-01-01T00:00:00|0190a000-0000-7000-8000-000000000000",  # no offset
    "0001-01-01T00:00:00+14:00|0190a000-0000-7000-8000-000000000000",  # before year 1
    "2024-01-01T00:00:00+00:00|not-a-uuid",
    "2024-01-01T00:00:00+00:00",
    "x|y|z",
)


async def test_crafted_cursors_are_refused_naming_after(client: httpx.AsyncClient) -> None:
    """Each list's crafted cursors, one database set-up for all (they change nothing)."""
    for cursor in CRAFTED_EVENT_CURSORS:
        response = await client.get("/v1/events", params={"after": b64(cursor)})
        assert refused_as_after(response), (cursor, response.text)
    for cursor in CRAFTED_CAMPAIGN_CURSORS:
        response = await client.get("/v1/campaigns", params={"after": b64(cursor, padded=True)})
        assert refused_as_after(response), (cursor, response.text)


async def test_a_cursor_past_the_end_of_the_log_is_an_empty_page(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, channels=("email",))
    accepted = (await post(client, email_to("ana@example.com"))).json()
    async with running_dispatcher(service, ScriptedProvider()):
        await eventually(lambda: _sent(client, accepted["id"]))
    # There is something a wrong answer could show (on PostgreSQL, once no transaction
    # running can still precede it).
    await eventually(lambda: _events(client))

    last = f"{2**63 - 1}.{2**63 - 1}"
    page = await client.get("/v1/events", params={"after": b64(last)})
    assert page.status_code == 200, page.text
    assert page.json()["events"] == []


async def _events(client: httpx.AsyncClient) -> list[Any]:
    found: list[Any] = (await client.get("/v1/events")).json()["events"]
    return found


async def _sent(client: httpx.AsyncClient, notification_id: str) -> bool:
    found = (await client.get(f"/v1/notifications/{notification_id}")).json()
    return all(d["status"] == "SENT" for d in found["deliveries"])


NUMBERS = st.integers(min_value=-(2**70), max_value=2**70)
CURSOR_TEXTS = st.one_of(
    st.text(max_size=60),
    st.builds(lambda a, b: f"{a}.{b}", NUMBERS, NUMBERS),
    st.builds(lambda a, b: f"{a}|{b}", st.text(max_size=40), st.uuids().map(str)),
)


@settings(max_examples=60, **FUZZ)
@given(path=st.sampled_from(LISTS), text=CURSOR_TEXTS, encoded=st.booleans())
async def test_no_cursor_is_a_server_error(
    client: httpx.AsyncClient, path: str, text: str, encoded: bool
) -> None:
    cursor = b64(text) if encoded else text
    response = await client.get(path, params={"after": cursor})
    # 400 for text no query may hold (a NUL), 422 naming after for the rest; never a 500.
    assert response.status_code in (200, 400, 422), response.text
    if response.status_code == 422:
        assert response.json()["error"]["field"] == "after"
