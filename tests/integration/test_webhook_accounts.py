"""A provider account's webhook touches only its own deliveries (docs/security.md).

Two accounts of one kind (Postmark pm-a, pm-b; Twilio tw-a, tw-b) and others of other kinds
(SendGrid sg-c, Mailgun mg-d, SES ses-x, SMTP smtp-e with the bounce listener; Vonage vn-c),
deliveries of two namespaces, each recorded as sent through its account as a dispatcher
records it. A request validly signed (or authenticated) by one
account, naming another account's delivery by our id and by its provider message id, is
counted as ignored and moves, records and suppresses nothing; the account's own events still
work. Run on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from pydantic import SecretStr

from tests.helpers import post, put_type
from tests.integration.test_api_keys import add_key, http
from tests.integration.test_provider_ses import ses_account, simulator
from tests.integration.test_smtp_bounces import DOMAIN, RETURN_PATH, postfix_bounce, verp
from tidings.api.app import create_app
from tidings.api.auth import ALL_SCOPES
from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.providers._twilio import DELIVERY_PARAM
from tidings.providers.mailgun import MailgunAccount
from tidings.providers.postmark import PostmarkAccount
from tidings.providers.sendgrid import SendGridAccount
from tidings.providers.sendgrid.signature import EventWebhookSigner
from tidings.providers.ses.receiver import CERTIFICATES
from tidings.providers.smtp import SmtpAccount
from tidings.providers.smtp.adapter import bounce_accounts
from tidings.providers.twilio import TwilioAccount
from tidings.providers.twilio.signature import SIGNATURE_HEADER, compute_signature
from tidings.providers.vonage import VonageAccount
from tidings.service import Service
from tidings.simulator.mailgun.events import signature as mailgun_signature
from tidings.simulator.server import Simulator
from tidings.simulator.ses.api import SesSimulator
from tidings.simulator.vonage.reports import sign as vonage_sign
from tidings.states import Status
from tidings.store import tracking
from tidings.store.claims import ClaimedDelivery, claim_due
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome, write_outcomes
from tidings.store.schema import delivery, delivery_event, suppression
from tidings.store.tracking import DeliveryKey, Tracked
from tidings.tracking.bounce_listener import BounceHandler

SIGNER = EventWebhookSigner()
MAILGUN_KEY = "mailgun-signing-key-of-the-test"
VONAGE_SECRET = "a-signature-secret-for-the-tests-0123456789"
TOKENS = {"tw-a": "a" * 32, "tw-b": "b" * 32}
HOOKS = {"pm-a": ("hooks-a", "password-a"), "pm-b": ("hooks-b", "password-b")}

# address -> (namespace, account that sent it, its provider message id)
EMAILS = {
    "a1@example.com": ("shop", "pm-a", "pm-msg-a1"),
    "c1@example.com": ("shop", "sg-c", "sgmsgc1"),
    "d1@example.com": ("shop", "mg-d", "mg-msg-d1@mg.example.com"),
    "b1@example.com": ("bank", "pm-b", "pm-msg-b1"),
    "s1@example.com": ("bank", "smtp-e", "<s1.1@tidings.example.com>"),
    "e1@example.com": ("bank", "ses-x", "0100018c-ses-e1-000000"),
}
PHONES = {
    "+15005550101": ("shop", "tw-a", "SM" + "a" * 32),
    "+15005550102": ("bank", "tw-b", "SM" + "b" * 32),
    "+15005550103": ("bank", "vn-c", "aaaaaaaa-bbbb-4ccc-8ddd-0123456789ab"),
}


def accounts() -> dict[str, Any]:
    postmark = {
        name: PostmarkAccount(
            server_token=SecretStr(f"token-{name}"),
            from_email="noreply@tidings.example.com",
            webhook_username=user,
            webhook_password=SecretStr(password),
        )
        for name, (user, password) in HOOKS.items()
    }
    twilio = {
        name: TwilioAccount(
            account_sid="AC" + token,
            auth_token=SecretStr(token),
            from_number="+15005550006",
        )
        for name, token in TOKENS.items()
    }
    smtp = {
        name: SmtpAccount(
            host="127.0.0.1", from_address="noreply@tidings.example.com", return_path=path
        )
        for name, path in (("smtp-e", RETURN_PATH), ("smtp-f", "b+{delivery}@elsewhere.test"))
    }
    return {
        **postmark,
        **twilio,
        **smtp,
        "sg-c": SendGridAccount(
            api_key=SecretStr("SG.key"),
            from_email="noreply@tidings.example.com",
            event_webhook_public_key=SIGNER.public_key,
        ),
        "mg-d": MailgunAccount(
            api_key=SecretStr("key-mailgun"),
            domain="mg.example.com",
            from_email="noreply@mg.example.com",
            webhook_signing_key=SecretStr(MAILGUN_KEY),
        ),
        "vn-c": VonageAccount(
            sender="+15005550007",
            api_key="vonage-key",
            api_secret=SecretStr("vonage-secret"),
            signature_secret=SecretStr(VONAGE_SECRET),
        ),
    }


@pytest.fixture
def app(service: Service) -> FastAPI:
    return create_app(service)


@dataclass
class World:
    service: Service
    client: httpx.AsyncClient  # webhooks need no key
    ids: dict[str, uuid.UUID]  # address -> delivery id

    @property
    def db(self) -> Database:
        return self.service.db


@pytest.fixture
async def world(app: FastAPI) -> AsyncIterator[World]:
    service: Service = app.state.service
    service.settings = service.settings.model_copy(update={"accounts": accounts()})
    for namespace in ("shop", "bank"):
        async with in_namespace(app, namespace) as client:
            await accept(client, namespace)
    ids = await sent_through_their_accounts(service.db)
    async with http(app) as client:
        yield World(service, client, ids)


@asynccontextmanager
async def in_namespace(app: FastAPI, namespace: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the API with a key of every scope in ``namespace``."""
    key = await add_key(app, namespace, ALL_SCOPES, namespace)
    async with http(app, key) as client:
        yield client


async def accept(client: httpx.AsyncClient, namespace: str) -> None:
    await put_type(client, channels=("email", "sms"))
    for address, (owner, _, _) in EMAILS.items():
        if owner == namespace:
            await accept_one(client, "email", address)
    for number, (owner, _, _) in PHONES.items():
        if owner == namespace:
            await accept_one(client, "sms", number)


async def accept_one(client: httpx.AsyncClient, channel: str, address: str) -> None:
    """An order.confirmed to ``address`` on ``channel`` alone."""
    to = {"email": address} if channel == "email" else {"phone": address}
    body = {"type": "order.confirmed", "to": to, "channels": [channel]}
    assert (await post(client, body)).status_code == 202


async def sent_through_their_accounts(db: Database) -> dict[str, uuid.UUID]:
    """Claim every delivery and write its outcome, naming its account (as a dispatcher does)."""
    now = utcnow()
    total = len(EMAILS) + len(PHONES)
    claimed = await claim_due(db, Priority.NORMAL, total, now, now + timedelta(seconds=60))
    assert len(claimed) == total
    sends = EMAILS | PHONES
    outcomes = [sent(c, sends[c.address][1], now, sends[c.address][2]) for c in claimed]
    await write_outcomes(db, outcomes, utcnow())
    return {c.address: c.id for c in claimed}


def sent(
    claimed: ClaimedDelivery, account: str, now: datetime, provider_msg_id: str | None = None
) -> Outcome:
    """``claimed``'s SENT outcome through ``account``, as a dispatcher writes it."""
    return Outcome(
        delivery_id=claimed.id,
        claimed_attempts=claimed.attempts,
        status=Status.SENT,
        attempts=claimed.attempts,
        provider=account,
        provider_msg_id=provider_msg_id,
        sent_at=now,
    )


async def state(db: Database, address: str) -> tuple[str, list[str], str | None]:
    """The delivery's status, its history's kinds, and its address's suppression."""
    async with db.engine.connect() as conn:
        row = (await conn.execute(sa.select(delivery).where(delivery.c.address == address))).one()
        kinds = await conn.execute(
            sa.select(delivery_event.c.kind).where(delivery_event.c.delivery_id == row.id)
        )
        reason = await conn.scalar(
            sa.select(suppression.c.reason).where(suppression.c.address == address)
        )
    return row.status, list(kinds.scalars()), reason


def untouched(found: tuple[str, list[str], str | None]) -> bool:
    return found == ("SENT", [], None)


def answer(response: httpx.Response) -> dict[str, Any]:
    """A webhook's answer: accepted (200), its counts."""
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


# --- the requests, each validly signed by ``account`` ---------------------------------------


async def postmark_bounce(world: World, account: str, address: str) -> dict[str, Any]:
    record = {
        "RecordType": "Bounce",
        "Type": "HardBounce",
        "ID": uuid.uuid4().int % 10**12,
        "MessageID": EMAILS[address][2],
        "Email": address,
        "Metadata": {"tidings_delivery_id": str(world.ids[address])},
    }
    user, password = HOOKS[account]
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    response = await world.client.post(
        f"/v1/webhooks/postmark/{account}",
        json=record,
        headers={"Authorization": f"Basic {token}"},
    )
    return answer(response)


async def sendgrid_bounce(world: World, address: str) -> dict[str, Any]:
    event = {
        "event": "bounce",
        "type": "bounce",
        "email": address,
        "timestamp": int(time.time()),
        "sg_event_id": str(uuid.uuid4()),
        "sg_message_id": f"{EMAILS[address][2]}.filter0001",
        "delivery_id": str(world.ids[address]),
    }
    body = json.dumps([event]).encode()
    response = await world.client.post(
        "/v1/webhooks/sendgrid/sg-c",
        content=body,
        headers={"Content-Type": "application/json", **SIGNER.sign(body)},
    )
    return answer(response)


async def mailgun_complaint(world: World, address: str) -> dict[str, Any]:
    data = {
        "event": "complained",
        "id": str(uuid.uuid4()),
        "timestamp": time.time(),
        "recipient": address,
        "message": {"headers": {"message-id": EMAILS[address][2]}},
        "user-variables": {"tidings_delivery_id": str(world.ids[address])},
    }
    signed = mailgun_signature(MAILGUN_KEY, str(int(time.time())), uuid.uuid4().hex)
    body = {"signature": signed, "event-data": data}
    response = await world.client.post("/v1/webhooks/mailgun/mg-d", json=body)
    return answer(response)


async def twilio_unknown_number(world: World, account: str, number: str) -> dict[str, Any]:
    path = f"/v1/webhooks/twilio/{account}?{DELIVERY_PARAM}={world.ids[number]}"
    sid = PHONES[number][2]
    form = {"MessageSid": sid, "MessageStatus": "undelivered", "ErrorCode": "30005"}
    url = world.service.settings.public_url.rstrip("/") + path
    response = await world.client.post(
        path,
        content=urlencode(form).encode(),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            SIGNATURE_HEADER: compute_signature(TOKENS[account], url, form),
        },
    )
    return answer(response)


async def vonage_rejected(world: World, number: str) -> dict[str, Any]:
    event = {
        "message_uuid": PHONES[number][2],
        "client_ref": str(world.ids[number]),
        "status": "rejected",
        "error": {"title": "1320", "detail": "unknown number"},
        "channel": "sms",
    }
    body = json.dumps(event).encode()
    token = vonage_sign(VONAGE_SECRET, body, "k", "app", time.time())
    response = await world.client.post(
        "/v1/webhooks/vonage/vn-c",
        content=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    return answer(response)


# --- the tests ------------------------------------------------------------------------------


async def test_an_email_account_cannot_move_another_accounts_delivery(world: World) -> None:
    """pm-b (the same kind), sg-c and mg-d (other kinds) name pm-a's delivery of the shop
    namespace, by our id and by Postmark's message id: nothing happens to it."""
    for answer in (
        await postmark_bounce(world, "pm-b", "a1@example.com"),
        await sendgrid_bounce(world, "a1@example.com"),
        await mailgun_complaint(world, "a1@example.com"),
        await sendgrid_bounce(world, "b1@example.com"),  # the other namespace's
    ):
        assert answer["applied"] == 0 and answer["ignored"] == 1, answer
    for address in ("a1@example.com", "b1@example.com"):
        assert untouched(await state(world.db, address))

    # Each account's own events still work.
    assert (await postmark_bounce(world, "pm-a", "a1@example.com"))["applied"] == 1
    assert (await postmark_bounce(world, "pm-b", "b1@example.com"))["applied"] == 1
    assert (await sendgrid_bounce(world, "c1@example.com"))["applied"] == 1
    assert (await mailgun_complaint(world, "d1@example.com"))["applied"] == 1
    assert await state(world.db, "a1@example.com") == ("BOUNCED", ["bounced"], "hard_bounce")
    assert await state(world.db, "b1@example.com") == ("BOUNCED", ["bounced"], "hard_bounce")
    assert await state(world.db, "c1@example.com") == ("BOUNCED", ["bounced"], "hard_bounce")
    assert await state(world.db, "d1@example.com") == ("SENT", ["complained"], "complaint")


async def test_an_sms_account_cannot_move_another_accounts_delivery(world: World) -> None:
    shop, bank, vonage = "+15005550101", "+15005550102", "+15005550103"
    for answer in (
        await twilio_unknown_number(world, "tw-b", shop),  # the same kind, another namespace
        await twilio_unknown_number(world, "tw-a", bank),
        await twilio_unknown_number(world, "tw-a", vonage),  # another kind's delivery
    ):
        assert answer["applied"] == 0 and answer["ignored"] == 1, answer
    for number in (shop, bank, vonage):
        assert untouched(await state(world.db, number))

    assert (await twilio_unknown_number(world, "tw-a", shop))["applied"] == 1
    assert (await vonage_rejected(world, vonage))["applied"] == 1
    assert await state(world.db, shop) == ("FAILED", ["undelivered"], "unknown_number")
    assert (await state(world.db, vonage))[:2] == ("FAILED", ["undelivered"])


async def test_a_bounce_report_moves_only_deliveries_of_the_smtp_accounts_it_serves(
    world: World,
) -> None:
    """Anyone can mail the bounce listener: a report naming pm-a's delivery (VERP and the
    returned header both) is ignored; one about smtp-e's, whose return path is at the
    listener's domain, bounces it."""
    served = bounce_accounts(world.service.settings.accounts, DOMAIN)
    assert served == {"smtp-e"}  # not smtp-f: its bounces go elsewhere
    handler = BounceHandler(DOMAIN, world.db, served)
    for address in ("a1@example.com", "s1@example.com"):
        delivery_id = world.ids[address]
        await handler.take(postfix_bounce(delivery_id, to=address), [verp(delivery_id)])

    assert handler.counts["ignored"] == 1 and handler.counts["applied"] == 1
    assert untouched(await state(world.db, "a1@example.com"))
    assert await state(world.db, "s1@example.com") == ("BOUNCED", ["bounced"], "hard_bounce")


@pytest.fixture
async def ses_sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    """The simulated SES, whose SNS topic signs notifications."""
    async with simulator(tmp_path) as simulated:
        yield simulated


async def ses_complaint(world: World, sim: Simulator, address: str) -> dict[str, Any]:
    """A complaint SNS signed for account ses-x's topic, naming ``address``'s delivery by
    its tag and by its message id."""
    event = {
        "eventType": "Complaint",
        "complaint": {"complaintFeedbackType": "abuse", "feedbackId": str(uuid.uuid4())},
        "mail": {
            "messageId": EMAILS[address][2],
            "timestamp": "2020-01-01T08:30:04.000Z",
            "tags": {"tidings_delivery_id": [str(world.ids[address])]},
        },
    }
    ses = sim.http["ses"]
    assert isinstance(ses, SesSimulator)
    response = await world.client.post(
        "/v1/webhooks/ses/ses-x",
        content=json.dumps(ses.topic.notification(event)).encode(),
        headers={"Content-Type": "text/plain; charset=UTF-8"},
    )
    return answer(response)


async def test_an_ses_account_cannot_move_another_accounts_delivery(
    world: World, ses_sim: Simulator
) -> None:
    settings = world.service.settings
    accounts = {**settings.accounts, "ses-x": ses_account(ses_sim)}
    world.service.settings = settings.model_copy(update={"accounts": accounts})
    CERTIFICATES.clear()
    answer = await ses_complaint(world, ses_sim, "a1@example.com")
    assert answer["applied"] == 0 and answer["ignored"] == 1, answer
    assert untouched(await state(world.db, "a1@example.com"))

    assert (await ses_complaint(world, ses_sim, "e1@example.com"))["applied"] == 1
    assert await state(world.db, "e1@example.com") == ("SENT", ["complained"], "complaint")


def bounce(delivery_id: uuid.UUID, at: datetime, event_id: str | None = None) -> Tracked:
    """A provider's hard bounce of ``delivery_id``, named by our id."""
    key = DeliveryKey(delivery_id, None)
    return Tracked(key, "bounced", at, event_id or str(uuid.uuid4()), Status.BOUNCED, "hard_bounce")


async def test_an_earlier_attempt_through_the_account_binds_its_events(world: World) -> None:
    """A delivery attempted through pm-b (a retry named it) and then sent through pm-a:
    pm-b's report on its attempt is still its own; sg-c's is not."""
    address = "a1@example.com"
    async with world.db.engine.begin() as conn:
        retry = {"attempt": 1, "error": "timeout", "kind": "transient", "provider": "pm-b"}
        row = {"id": uuid.uuid4(), "delivery_id": world.ids[address], "kind": "retry_scheduled"}
        await conn.execute(sa.insert(delivery_event), [row | {"at": utcnow(), "detail": retry}])

    bounced = [bounce(world.ids[address], utcnow())]
    refused = await tracking.apply(world.db, "sg-c", "email", bounced, utcnow())
    assert (refused.applied, refused.ignored) == (0, 1)
    bounced = [bounce(world.ids[address], utcnow())]
    applied = await tracking.apply(world.db, "pm-b", "email", bounced, utcnow())
    assert (applied.applied, applied.ignored) == (1, 0)
    assert await state(world.db, address) == (
        "BOUNCED",
        ["retry_scheduled", "bounced"],
        "hard_bounce",
    )


@dataclass
class Sending:
    db: Database
    claimed: dict[str, ClaimedDelivery]  # address -> its delivery, claimed


@pytest.fixture
async def sending(app: FastAPI) -> Sending:
    """Two deliveries being sent (claimed, no outcome yet: their account is not recorded)."""
    service: Service = app.state.service
    async with in_namespace(app, "shop") as client:
        await put_type(client, channels=("email",))
        for address in ("early@example.com", "forged@example.com"):
            await accept_one(client, "email", address)
    now = utcnow()
    claimed = await claim_due(service.db, Priority.NORMAL, 2, now, now + timedelta(seconds=60))
    return Sending(service.db, {c.address: c for c in claimed})


async def test_an_event_that_outruns_its_send_waits_for_its_account(
    sending: Sending,
) -> None:
    """Events about deliveries still being sent wait whole (no history, no suppression);
    once the outcome names the account, the account's own is applied, another's dropped."""
    db, claimed, now = sending.db, sending.claimed, utcnow()
    events = [bounce(c.id, now, f"e-{a}") for a, c in claimed.items()]
    await tracking.apply(db, "pm-a", "email", events, now)
    for address in claimed:
        assert await state(db, address) == ("SENDING", [], None)

    sent_by = {"early@example.com": "pm-a", "forged@example.com": "pm-b"}
    outcomes = [sent(c, sent_by[a], now) for a, c in claimed.items()]
    await write_outcomes(db, outcomes, utcnow())
    assert await tracking.settle_early(db, utcnow()) == 1
    assert await state(db, "early@example.com") == ("BOUNCED", ["bounced"], "hard_bounce")
    assert await state(db, "forged@example.com") == ("SENT", [], None)
    assert await tracking.settle_early(db, utcnow()) == 0  # dropped, not kept


async def test_many_waiting_events_never_hide_a_ready_one(
    sending: Sending,
) -> None:
    """An account may name, many times over, a delivery that stays in progress (deferred
    for hours): those events wait, and a round still applies the one whose send is done."""
    db, claimed, now = sending.db, sending.claimed, utcnow()
    stuck, early = claimed["forged@example.com"], claimed["early@example.com"]
    flood = [Tracked(DeliveryKey(stuck.id, None), "opened", now, f"flood-{i}") for i in range(1001)]
    await tracking.apply(db, "pm-b", "email", flood, now)
    await tracking.apply(db, "pm-a", "email", [bounce(early.id, now, "real")], now)
    await write_outcomes(db, [sent(early, "pm-a", now)], utcnow())

    assert await tracking.settle_early(db, utcnow()) == 1
    assert await state(db, "early@example.com") == ("BOUNCED", ["bounced"], "hard_bounce")
    assert await state(db, "forged@example.com") == ("SENDING", [], None)
