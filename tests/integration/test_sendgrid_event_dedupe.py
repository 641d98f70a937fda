"""SendGrid events without ``sg_event_id`` (older webhooks, relays that drop it) are
deduplicated by a digest of the event (docs/events.md): a replayed batch is not applied
twice."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.test_webhooks import (  # noqa: F401 - fixtures
    accounts,
    delivery,
    kinds,
    post_events,
    send_emails,
    sg_event,
    sim,
)
from tidings.service import Service
from tidings.simulator.server import Simulator


@pytest.mark.usefixtures("accounts")
async def test_a_replayed_batch_without_event_ids_is_applied_once(
    client: httpx.AsyncClient,
    service: Service,
    sim: Simulator,  # noqa: F811
) -> None:
    ana = "ana@example.com"
    sent = await send_emails(client, service, sim, ana)
    events = [
        sg_event(sim, ana, "open"),
        sg_event(sim, ana, "click", url="https://shop.example.com/a"),
        sg_event(sim, ana, "click", url="https://shop.example.com/b"),
    ]
    for event in events:
        del event["sg_event_id"]
    first = await post_events(client, events)
    assert first.json()["applied"] == 3, first.text
    history = kinds(await delivery(client, sent[ana]))
    assert (history.count("opened"), history.count("clicked")) == (1, 2)

    again = await post_events(client, events)
    assert (again.json()["applied"], again.json()["duplicates"]) == (0, 3), again.text
    assert kinds(await delivery(client, sent[ana])) == history
    # Another event of the same kind (a later click) is not taken for a repeat.
    later = await post_events(client, [{**events[1], "timestamp": events[1]["timestamp"] + 1}])
    assert later.json()["applied"] == 1
