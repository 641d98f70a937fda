"""Opens a provider reports are told apart like tidings' own: machine opens (Apple Mail
Privacy Protection, scanners, no client named) are marked, so reports can leave them out."""

from __future__ import annotations

from typing import Any

import pytest

from tidings.clock import utcnow
from tidings.providers.mailgun.events import mailgun_event
from tidings.providers.postmark.events import postmark_event
from tidings.providers.sendgrid.events import sendgrid_event

THUNDERBIRD = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Thunderbird/128.0"


def sendgrid_open(**fields: Any) -> dict[str, Any]:
    return {"event": "open", "sg_event_id": "e1", "timestamp": 1, **fields}


@pytest.mark.parametrize(
    ("fields", "machine"),
    [
        ({"useragent": THUNDERBIRD}, False),
        ({"useragent": THUNDERBIRD, "sg_machine_open": True}, True),  # SendGrid knows better
        ({"useragent": "Mozilla/5.0"}, True),  # Apple's proxies
        ({}, True),  # no client named: not counted as a person
    ],
)
def test_sendgrid_opens(fields: dict[str, Any], machine: bool) -> None:
    tracked = sendgrid_event(sendgrid_open(**fields), utcnow())
    assert tracked is not None and tracked.kind == "opened"
    assert tracked.detail["machine"] is machine


@pytest.mark.parametrize(("agent", "machine"), [(THUNDERBIRD, False), ("python-requests/2", True)])
def test_mailgun_and_postmark_opens(agent: str, machine: bool) -> None:
    mailgun = mailgun_event(
        {"event": "opened", "id": "m1", "timestamp": 1, "client-info": {"user-agent": agent}},
        utcnow(),
    )
    postmark = postmark_event(
        {"RecordType": "Open", "MessageID": "p1", "UserAgent": agent, "ReceivedAt": None},
        utcnow(),
    )
    for tracked in (mailgun, postmark):
        assert tracked is not None and tracked.kind == "opened"
        assert tracked.detail["machine"] is machine


def test_a_clicks_detail_is_left_as_it_was() -> None:
    click = sendgrid_event(
        {"event": "click", "sg_event_id": "c1", "url": "https://x.example"}, utcnow()
    )
    assert click is not None and "machine" not in click.detail
