"""The provider table of the contract suite: for each provider, how to point an account at
the simulator, a message it can send, and its row of capabilities (``cases.Capabilities``).

This is the only module of tests/integration/contract that imports provider modules: when a provider
moves, its import changes here. Adding a provider is adding a row to ``PROVIDERS``; the
suite then names each case the row does not fill (or marks NotApplicable, with why).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlencode, urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from pydantic import SecretStr

from tests.integration.contract.cases import (
    UNCHECKED,
    Above,
    Ambiguous,
    Answer,
    AtLeast,
    Callback,
    Capabilities,
    Inbound,
    Misconfigured,
    NotApplicable,
    Raised,
    Repeat,
    Sent,
)
from tests.messages import message, push
from tidings.priorities import Channel, Priority
from tidings.providers.accounts import AccountSettings
from tidings.providers.apns import ApnsAccount, ApnsProvider
from tidings.providers.base import (
    Content,
    Message,
    PermanentError,
    PoisonError,
    Provider,
    ProviderError,
    TransientError,
)
from tidings.providers.discord import DiscordAccount, DiscordProvider
from tidings.providers.fcm import FcmAccount, FcmProvider
from tidings.providers.mailgun import MailgunAccount, MailgunProvider
from tidings.providers.mailgun import signature as mailgun_signature
from tidings.providers.postmark import PostmarkAccount, PostmarkProvider
from tidings.providers.resend import ResendAccount, ResendProvider
from tidings.providers.resend import signature as resend_signature
from tidings.providers.sendgrid import SendGridAccount, SendGridProvider
from tidings.providers.sendgrid.signature import EventWebhookSigner
from tidings.providers.ses import SesAccount, SesProvider
from tidings.providers.slack import SlackAccount, SlackProvider
from tidings.providers.smtp import SmtpAccount, SmtpProvider
from tidings.providers.sparkpost import SparkPostAccount, SparkPostProvider
from tidings.providers.teams import TeamsAccount, TeamsProvider
from tidings.providers.telegram import TelegramAccount, TelegramProvider
from tidings.providers.twilio import TwilioAccount, TwilioProvider
from tidings.providers.twilio.signature import SIGNATURE_HEADER, compute_signature
from tidings.providers.twilio_whatsapp import TwilioWhatsAppAccount, TwilioWhatsAppProvider
from tidings.providers.vonage import VonageAccount, VonageProvider
from tidings.providers.webhook import WebhookAccount, WebhookProvider
from tidings.providers.webpush import WebPushAccount, WebPushProvider
from tidings.providers.whatsapp import WhatsAppAccount, WhatsAppProvider
from tidings.providers.whatsapp.receiver import signature as whatsapp_signature
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.simulator.ses.api import SesSimulator
from tidings.simulator.ses.config import SesConfig
from tidings.simulator.smtp import SmtpServer
from tidings.simulator.vonage.reports import sign as vonage_sign
from tidings.states import Effect

__all__ = ["OTHER", "PROVIDERS", "Contract", "ProviderError", "TransientError"]

SUPPRESS, DEACTIVATE = Effect.SUPPRESS_ADDRESS, Effect.DEACTIVATE_DEVICE
P, T, X = PermanentError, TransientError, PoisonError
EMAIL = Content(subject="Your order", text="Thanks.", html="<p>Thanks.</p>")
# SendGrid's adapter reads X-RateLimit-Reset against this fixed clock (a real epoch second
# of the simulator is long after it), so a wait read from the reset is over 1000 seconds.
SENDGRID_NOW = 1_700_000_000.0


class Contract:
    """One provider of the table. ``account`` points at the simulator, ``adapter`` builds
    the provider, ``message`` is a fresh message it can send, ``scripted`` the address the
    simulator scripts answers by, ``unreachable`` an account and message aimed at ``url``
    (a closed port)."""

    name: str
    state: str
    capabilities: Capabilities

    def config(self, tmp_path: Path) -> SimulatorConfig:
        return SimulatorConfig(credentials_dir=tmp_path / "credentials")

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        raise NotImplementedError

    def adapter(self, account: AccountSettings) -> Provider:
        raise NotImplementedError

    def message(self, sim: Simulator) -> Message:
        raise NotImplementedError

    def scripted(self, message: Message) -> str:
        return message.address

    def unreachable(self, sim: Simulator, url: str) -> tuple[AccountSettings, Message]:
        return self.account(sim, base_url=url), self.message(sim)

    # The inbound side (rows whose ``inbound`` is filled): callbacks to tidings.

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        """The settings' account ``name`` (the adapter's name, or OTHER), verifying its
        callbacks with a secret of its own."""
        raise NotImplementedError

    def inbound_adapter(self, sim: Simulator, public_url: str) -> Provider:
        """The adapter sending the message the callbacks report on."""
        return self.adapter(self.receiving(sim, self.adapter(self.account(sim)).name))

    def delivered(self, sent: Sent) -> Any:
        """What the provider posts to say ``sent`` was delivered."""
        raise NotImplementedError

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        """The request reporting ``event`` to ``account``, signed with that account's secret
        (``forged``: with a secret no account has)."""
        raise NotImplementedError


# The second account of a provider's kind in the settings, with its own secret.
OTHER = "other-account"


def _email(address: str = "ada@example.com") -> Message:
    return message(Channel.EMAIL, address, EMAIL)


def _sms(to: str) -> Message:
    return message(Channel.SMS, to, Content(text="Your code is 123456"), type="otp",
                   priority=Priority.HIGH)  # fmt: skip


def _pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


class SendGrid(Contract):
    name, state = "sendgrid", "sendgrid"
    key = "SG.test-key"

    def config(self, tmp_path: Path) -> SimulatorConfig:
        return SimulatorConfig(credentials_dir=tmp_path / "credentials", sendgrid_api_key=self.key)

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "api_key": SecretStr(self.key),
            "base_url": sim.url,
            "from_email": "noreply@tidings.example.com",
            "from_name": "Tidings",
            "timeout": 5,
        }
        return SendGridAccount(**(fields | changes))

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, SendGridAccount)
        return SendGridProvider("sendgrid-main", account, clock=lambda: SENDGRID_NOW)

    def message(self, sim: Simulator) -> Message:
        return _email()

    signers: ClassVar = {"sendgrid-main": EventWebhookSigner(), OTHER: EventWebhookSigner()}

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        return self.account(sim, event_webhook_public_key=self.signers[name].public_key)

    def delivered(self, sent: Sent) -> Any:
        return [
            {
                "email": sent.address,
                "timestamp": int(time.time()),
                "event": "delivered",
                "sg_event_id": uuid.uuid4().hex,
                "sg_message_id": f"{sent.provider_msg_id}.filterdrecv-p3mdw1-18-5F5FC76C-9.0",
                **sent.payload["personalizations"][0]["custom_args"],
            }
        ]

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        body = json.dumps(event).encode()
        signer = EventWebhookSigner() if forged else self.signers[account]
        headers = {"Content-Type": "application/json", **signer.sign(body)}
        return Callback(f"/v1/webhooks/sendgrid/{account}", body, headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("400", Raised(P, "bad_request")),
            Answer("401", Raised(T, "credentials")),
            Answer("403", Raised(T, "credentials")),
            Answer("413", Raised(X, "payload_too_large")),
            # Every answer carries X-RateLimit-Reset: a 5xx must not wait for it, the
            # retry policy's backoff decides.
            Answer("500", Raised(T, "http_500", retry_after=None)),
            Answer("502", Raised(T, "http_502")),
            Answer("404", Raised(P, "http_404")),
        ),
        rate_limited=Raised(T, "rate_limited", Above(1000), says="too many requests"),
        outage=Raised(T, "http_503"),
        misconfigured=(
            Misconfigured(
                "wrong-key",
                {"api_key": SecretStr("SG.wrong")},
                Raised(T, "credentials", AtLeast(60), says="authorization grant is invalid"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "sendgrid",
            "email",
            "ana@example.com",
            replay="deduplicated",
            unconfigured={"event_webhook_public_key": None},
        ),
    )


class Mailgun(Contract):
    name, state = "mailgun", "mailgun"
    key, domain = "key-test-mailgun", "mg.tidings.example.com"

    def config(self, tmp_path: Path) -> SimulatorConfig:
        return SimulatorConfig(
            credentials_dir=tmp_path / "credentials",
            mailgun_api_key=self.key,
            mailgun_domains=[self.domain],
        )

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "api_key": SecretStr(self.key),
            "domain": self.domain,
            "base_url": sim.url,
            "from_email": "noreply@tidings.example.com",
            "from_name": "Tidings, Inc.",
            "timeout": 5,
        }
        return MailgunAccount(**(fields | changes))

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, MailgunAccount)
        return MailgunProvider("mailgun-main", account)

    def message(self, sim: Simulator) -> Message:
        return _email()

    signing_keys: ClassVar = {
        "mailgun-main": "signing-key-of-the-test",
        OTHER: "signing-key-of-another",
    }

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        return self.account(sim, webhook_signing_key=SecretStr(self.signing_keys[name]))

    def delivered(self, sent: Sent) -> Any:
        return {
            "event": "delivered",
            "id": uuid.uuid4().hex[:22],
            "timestamp": time.time(),
            "recipient": sent.address,
            "message": {"headers": {"message-id": sent.provider_msg_id}},
            "user-variables": {"tidings_delivery_id": sent.delivery_id},
        }

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        key = "another-key" if forged else self.signing_keys[account]
        signature = mailgun_signature.sign(key, int(time.time()))
        body = json.dumps({"signature": signature, "event-data": event}).encode()
        headers = {"Content-Type": "application/json"}
        return Callback(f"/v1/webhooks/mailgun/{account}", body, headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("400", Raised(P, "bad_request")),
            Answer("401", Raised(T, "credentials")),
            Answer("403", Raised(T, "credentials")),
            Answer("404", Raised(T, "domain_not_found")),
            Answer("413", Raised(X, "payload_too_large")),
            Answer("429", Raised(T, "rate_limited")),
            Answer("500", Raised(T, "http_500")),
            Answer("502", Raised(T, "http_502")),
            Answer("503", Raised(T, "http_503")),
            Answer("402", Raised(P, "http_402")),
        ),
        rate_limited=Raised(T, "rate_limited"),
        outage=Raised(T, "http_503"),
        misconfigured=(
            Misconfigured(
                "wrong-key",
                {"api_key": SecretStr("key-wrong")},
                Raised(T, "credentials", 300.0, says="Forbidden"),
            ),
            Misconfigured(
                "unknown-domain",
                {"domain": "other.example.com"},
                Raised(T, "domain_not_found", 300.0, says="Domain not found"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        # A captured signature is accepted once (the body is not signed): 406 tells Mailgun
        # not to retry.
        inbound=Inbound(
            "mailgun",
            "email",
            "ana@example.com",
            replay="refused",
            replay_status=406,
            replay_code="replayed",
            unconfigured={"webhook_signing_key": None},
        ),
    )


class Postmark(Contract):
    name, state = "postmark", "postmark"
    token = "server-token-of-the-test"

    def config(self, tmp_path: Path) -> SimulatorConfig:
        return SimulatorConfig(
            credentials_dir=tmp_path / "credentials",
            postmark_server_token=self.token,
            postmark_senders=["tidings.example.com"],
        )

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "server_token": self.token,
            "base_url": sim.url,
            "from_email": "noreply@tidings.example.com",
            "from_name": "Tidings",
            "timeout": 5,
        }
        return PostmarkAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, PostmarkAccount)
        return PostmarkProvider("postmark-main", account)

    def message(self, sim: Simulator) -> Message:
        return _email()

    hook_user = "postmark-hooks"
    hook_passwords: ClassVar = {
        "postmark-main": "hook-password-of-the-test",
        OTHER: "hook-password-2",
    }

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        password = self.hook_passwords[name]
        return self.account(sim, webhook_username=self.hook_user, webhook_password=password)

    def delivered(self, sent: Sent) -> Any:
        return {
            "RecordType": "Delivery",
            "MessageID": sent.provider_msg_id,
            "MessageStream": "outbound",
            "Metadata": sent.payload["Metadata"],
            "ServerID": 23,
            "Tag": "order.confirmed",
            "Recipient": sent.address,
            "DeliveredAt": "2026-11-30T12:00:00Z",
        }

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        password = "wrong" if forged else self.hook_passwords[account]
        token = base64.b64encode(f"{self.hook_user}:{password}".encode()).decode()
        headers = {"Content-Type": "application/json", "Authorization": f"Basic {token}"}
        return Callback(f"/v1/webhooks/postmark/{account}", json.dumps(event).encode(), headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("10", Raised(T, "bad_api_token", 300.0)),
            Answer("300", Raised(P, "invalid_email_request", None)),
            Answer("400", Raised(T, "sender_signature_not_found", 300.0)),
            Answer("401", Raised(T, "sender_signature_not_confirmed", 300.0)),
            Answer("402", Raised(P, "invalid_json", None)),
            Answer("403", Raised(P, "incompatible_json", None)),
            Answer("405", Raised(T, "not_allowed_to_send", 300.0)),
            Answer("409", Raised(P, "json_required", None)),
            Answer("410", Raised(P, "too_many_batch_messages", None)),
            Answer("411", Raised(P, "forbidden_attachment_type", None)),
            Answer("412", Raised(T, "account_pending", 300.0)),
            Answer("413", Raised(T, "account_may_not_send", 300.0)),
            Answer("429", Raised(T, "rate_limited", None)),
            Answer("100", Raised(T, "http_503", None)),
            Answer("999", Raised(P, "postmark_999", None)),
            Answer("http_413", Raised(X, "payload_too_large", None)),
            Answer("http_500", Raised(T, "http_500", None)),
        ),
        rate_limited=Raised(T, "rate_limited"),
        outage=Raised(T, "http_503"),
        misconfigured=(
            Misconfigured(
                "wrong-token",
                {"server_token": "wrong"},
                Raised(T, "bad_api_token", 300.0, says="valid Server token"),
            ),
            Misconfigured(
                "unknown-sender",
                {"from_email": "a@elsewhere.example"},
                Raised(T, "sender_signature_not_found", 300.0, says="Sender Signature"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "postmark",
            "email",
            "ana@example.com",
            replay="deduplicated",
            unconfigured={"webhook_username": None, "webhook_password": None},
        ),
    )


class Resend(Contract):
    name, state = "resend", "resend"
    key = "re_test_key"

    def config(self, tmp_path: Path) -> SimulatorConfig:
        return SimulatorConfig(
            credentials_dir=tmp_path / "credentials",
            resend_api_key=self.key,
            resend_domains=["tidings.example.com"],
        )

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "api_key": SecretStr(self.key),
            "base_url": sim.url,
            "from_email": "noreply@tidings.example.com",
            "from_name": "Tidings",
            "timeout": 5,
        }
        return ResendAccount(**(fields | changes))

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, ResendAccount)
        return ResendProvider("resend-main", account)

    def message(self, sim: Simulator) -> Message:
        return _email()

    secrets: ClassVar = {
        "resend-main": "whsec_" + base64.b64encode(b"resend-secret-of-the-test").decode(),
        OTHER: "whsec_" + base64.b64encode(b"resend-secret-of-another").decode(),
    }

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        return self.account(sim, webhook_secret=SecretStr(self.secrets[name]))

    def delivered(self, sent: Sent) -> Any:
        tags = {t["name"]: t["value"] for t in sent.payload["tags"]}
        data = {"email_id": sent.provider_msg_id, "to": [sent.address], "tags": tags}
        return {"type": "email.delivered", "created_at": "2026-11-30T12:00:00.000Z", "data": data}

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        body = json.dumps(event).encode()
        secret = self.secrets[OTHER if forged and account != OTHER else account]
        if forged and account == OTHER:
            secret = "whsec_" + base64.b64encode(b"nobody").decode()
        msg_id, stamp = f"msg_{uuid.uuid4().hex}", int(time.time())
        headers = {
            "Content-Type": "application/json",
            "svix-id": msg_id,
            "svix-timestamp": str(stamp),
            "svix-signature": resend_signature.sign(secret, msg_id, stamp, body),
        }
        return Callback(f"/v1/webhooks/resend/{account}", body, headers)

    capabilities = Capabilities(
        repeat=Repeat(honoured=True),
        answers=(
            Answer("validation_error", Raised(P, "validation_error", None)),
            Answer("missing_required_field", Raised(P, "missing_required_field", None)),
            Answer("invalid_from_address", Raised(T, "invalid_from_address", 300.0)),
            Answer("missing_api_key", Raised(T, "missing_api_key", 300.0)),
            Answer("restricted_api_key", Raised(T, "restricted_api_key", 300.0)),
            Answer("invalid_api_key", Raised(T, "invalid_api_key", 300.0)),
            Answer("domain_not_verified", Raised(T, "sender_not_allowed", 300.0)),
            Answer("not_found", Raised(T, "not_found", 300.0)),
            Answer("invalid_idempotent_request", Raised(P, "idempotency_conflict", None)),
            Answer("concurrent_idempotent_requests", Raised(T, "idempotency_in_progress", 1.0)),
            Answer("invalid_idempotency_key", Raised(X, "invalid_idempotency_key", None)),
            Answer("rate_limit_exceeded", Raised(T, "rate_limit_exceeded", 1.0)),
            Answer("daily_quota_exceeded", Raised(T, "daily_quota_exceeded", 3600.0)),
            Answer("security_error", Raised(P, "security_error", None)),
            Answer("application_error", Raised(T, "application_error", None)),
            Answer("internal_server_error", Raised(T, "internal_server_error", None)),
        ),
        rate_limited=Raised(T, "rate_limit_exceeded", 1.0),
        outage=Raised(T, "internal_server_error"),
        misconfigured=(
            Misconfigured(
                "wrong-key",
                {"api_key": SecretStr("re_wrong")},
                Raised(T, "invalid_api_key", 300.0, says="API key is invalid"),
            ),
            Misconfigured(
                "unverified-domain",
                {"from_email": "a@elsewhere.example"},
                Raised(T, "sender_not_allowed", 300.0, says="domain is not verified"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "resend",
            "email",
            "ana@example.com",
            replay="deduplicated",
            unconfigured={"webhook_secret": None},
        ),
    )


class SparkPost(Contract):
    name, state = "sparkpost", "sparkpost"
    key = "sparkpost-key-of-the-test"

    def config(self, tmp_path: Path) -> SimulatorConfig:
        return SimulatorConfig(
            credentials_dir=tmp_path / "credentials",
            sparkpost_api_key=self.key,
            sparkpost_domains=["tidings.example.com"],
        )

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "api_key": SecretStr(self.key),
            "base_url": sim.url,
            "from_email": "noreply@tidings.example.com",
            "from_name": "Tidings",
            "timeout": 5,
        }
        return SparkPostAccount(**(fields | changes))

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, SparkPostAccount)
        return SparkPostProvider("sparkpost-main", account)

    def message(self, sim: Simulator) -> Message:
        return _email()

    tokens: ClassVar = {"sparkpost-main": "token-of-the-test", OTHER: "token-of-another"}

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        return self.account(sim, webhook_token=SecretStr(self.tokens[name]))

    def delivered(self, sent: Sent) -> Any:
        event = {
            "type": "delivery",
            "event_id": str(uuid.uuid4().int)[:18],
            "timestamp": str(int(time.time())),
            "transmission_id": sent.provider_msg_id,
            "rcpt_to": sent.address,
            "rcpt_meta": sent.payload["recipients"][0]["metadata"],
        }
        return [{"msys": {"message_event": event}}]

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        token = "forged-token" if forged else self.tokens[account]
        headers = {"Content-Type": "application/json", "X-MessageSystems-Webhook-Token": token}
        return Callback(f"/v1/webhooks/sparkpost/{account}", json.dumps(event).encode(), headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("1100", Raised(T, "permission_denied", 300.0)),
            Answer("1200", Raised(P, "invalid_params", None)),
            Answer("1300", Raised(P, "invalid_data", None)),
            Answer("1400", Raised(P, "required_field_missing", None)),
            Answer("1502", Raised(T, "resources_unavailable", None)),
            Answer("1900", Raised(T, "generation_unavailable", None)),
            Answer("1901", Raised(P, "generation_failed", None)),
            Answer("1902", Raised(P, "suppressed_recipient", None, SUPPRESS)),
            Answer("1910", Raised(T, "generation_not_configured", 300.0)),
            Answer("2101", Raised(T, "hourly_limit", 300.0)),
            Answer("2102", Raised(T, "daily_limit", 3600.0)),
            Answer("2105", Raised(T, "monthly_limit", 300.0)),
            Answer("7000", Raised(T, "sending_domain_blocked", 300.0)),
            Answer("7001", Raised(T, "invalid_sending_domain", 300.0)),
            Answer("http_401", Raised(T, "credentials", 300.0)),
            Answer("http_413", Raised(X, "payload_too_large", None)),
            Answer("http_500", Raised(T, "http_500", None)),
        ),
        rate_limited=Raised(T, "rate_limited"),
        outage=Raised(T, "http_503"),
        misconfigured=(
            Misconfigured(
                "wrong-key",
                {"api_key": SecretStr("wrong")},
                Raised(T, "credentials", 300.0, says="Unauthorized"),
            ),
            Misconfigured(
                "unconfigured-domain",
                {"from_email": "a@elsewhere.example"},
                Raised(T, "invalid_sending_domain", 300.0, says="Unconfigured Sending Domain"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "sparkpost",
            "email",
            "ana@example.com",
            replay="deduplicated",
            unconfigured={"webhook_token": None},
        ),
    )


class Ses(Contract):
    name, state = "ses", "ses"
    key_id, secret, region = "AKIATESTSES000000001", "test/ses+secret/key", "eu-west-1"

    def config(self, tmp_path: Path) -> SimulatorConfig:
        ses = SesConfig(
            access_key_id=self.key_id,
            secret_access_key=self.secret,
            region=self.region,
            verified_identities=["tidings.example.com"],
        )
        return SimulatorConfig(credentials_dir=tmp_path / "credentials", ses=ses)

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "access_key_id": self.key_id,
            "secret_access_key": SecretStr(self.secret),
            "region": self.region,
            "base_url": sim.url,
            "from_email": "noreply@tidings.example.com",
            "from_name": "Tidings",
            "timeout": 5,
        }
        return SesAccount(**(fields | changes))

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, SesAccount)
        return SesProvider("ses-main", account)

    def message(self, sim: Simulator) -> Message:
        return _email()

    other_topic = "arn:aws:sns:eu-west-1:123456789012:tidings-ses-of-another"

    def topic_arn(self, sim: Simulator, name: str) -> str:
        return sim.config.ses.topic_arn if name == "ses-main" else self.other_topic

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        # An account's callbacks are its SNS topic's, signed by SNS (the simulator's key,
        # its certificate fetched from the simulator).
        topics = [self.topic_arn(sim, name)]
        return self.account(sim, sns_topic_arns=topics, sns_trusted_origins=[sim.url])

    def delivered(self, sent: Sent) -> Any:
        return {
            "eventType": "Delivery",
            "delivery": {"smtpResponse": "250 2.6.0 Message received"},
            "mail": {
                "messageId": sent.provider_msg_id,
                "tags": {"tidings_delivery_id": [sent.delivery_id]},
            },
        }

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        ses = sim.http["ses"]
        assert isinstance(ses, SesSimulator)
        envelope = ses.topic.notification(event)
        if account != "ses-main":  # a notification of the other account's topic
            unsigned = {k: v for k, v in envelope.items() if not k.startswith("Signing")}
            unsigned.pop("Signature", None)
            envelope = ses.topic.sign_message(unsigned | {"TopicArn": self.topic_arn(sim, account)})
        if forged:
            fields = ("Message", "MessageId", "Timestamp", "TopicArn", "Type")
            signed = "".join(f"{n}\n{envelope[n]}\n" for n in fields).encode()
            forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            signature = forger.sign(signed, padding.PKCS1v15(), hashes.SHA1())
            envelope = envelope | {"Signature": base64.b64encode(signature).decode()}
        body = json.dumps(envelope).encode()
        headers = {"Content-Type": "text/plain; charset=UTF-8"}
        return Callback(f"/v1/webhooks/ses/{account}", body, headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("MessageRejected", Raised(P, "MessageRejected", None)),
            Answer("EmailNotVerified", Raised(T, "identity_not_verified", 300)),
            Answer(
                "MailFromDomainNotVerifiedException",
                Raised(T, "MailFromDomainNotVerifiedException", 300),
            ),
            Answer("AccountSuspendedException", Raised(T, "AccountSuspendedException", 300)),
            Answer("SendingPausedException", Raised(T, "SendingPausedException", 300)),
            Answer("NotFoundException", Raised(T, "NotFoundException", 300)),
            Answer("TooManyRequestsException", Raised(T, "rate_limited", None)),
            Answer("LimitExceededException", Raised(T, "rate_limited", None)),
            Answer("BadRequestException", Raised(P, "bad_request", None)),
            Answer("500", Raised(T, "http_500", None)),
            Answer("503", Raised(T, "http_503", None)),
            Answer("413", Raised(X, "payload_too_large", None)),
            Answer("409", Raised(P, "http_409", None)),
        ),
        rate_limited=Raised(T, "rate_limited", says="Maximum sending rate exceeded"),
        outage=Raised(T, "http_503"),
        misconfigured=(
            Misconfigured(
                "wrong-secret",
                {"secret_access_key": SecretStr("wrong")},
                Raised(T, "credentials", 300, says="signature we calculated does not match"),
            ),
            Misconfigured(
                "unknown-key-id",
                {"access_key_id": "AKIAUNKNOWN000000001"},
                Raised(T, "credentials", 300, says="security token included"),
            ),
            # The region changes the host SES would be at, not base_url: the simulator
            # sees the signature's scope.
            Misconfigured(
                "other-region",
                {"region": "us-west-2"},
                Raised(T, "credentials", 300, says="scoped to a valid region"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "ses",
            "email",
            "ana@example.com",
            replay="deduplicated",
            unconfigured={"sns_topic_arns": []},
        ),
    )


class Smtp(Contract):
    name, state = "smtp", "smtp"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        server = sim.servers["smtp"]
        assert isinstance(server, SmtpServer)
        fields: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": server.port,
            "tls": sim.config.smtp_tls,
            "username": sim.config.smtp_username,
            "password": SecretStr(sim.config.smtp_password),
            "from_address": "noreply@tidings.example.com",
            "from_name": "Tidings",
            "ca_file": server.cert_file,
            "timeout": 5,
        }
        return SmtpAccount(**(fields | changes))

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, SmtpAccount)
        return SmtpProvider("smtp-main", account)

    def message(self, sim: Simulator) -> Message:
        return message(Channel.EMAIL, "ada@example.com", Content("Your order", "Thanks.\n"))

    def unreachable(self, sim: Simulator, url: str) -> tuple[AccountSettings, Message]:
        port = int(url.rsplit(":", 1)[1])
        return self.account(sim, port=port), self.message(sim)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("5.1.1", Raised(P, "hard_bounce", effect=SUPPRESS)),
            Answer("5.2.2", Raised(T, "mailbox_full")),
            Answer("4.2.2", Raised(T, "mailbox_full")),
            Answer("4.x", Raised(T, "smtp_451")),
            Answer("421", Raised(T, "smtp_421")),
            Answer("5.7.1", Raised(P, "policy")),
            Answer("5.3.4", Raised(X, "message_too_large")),
            Answer("552", Raised(X, "message_too_large")),
            Answer("5.0.0", Raised(P, "smtp_554")),
        ),
        rate_limited=Raised(T, UNCHECKED, says="451 4.7.0"),
        outage=Raised(T, UNCHECKED, says="421 4.3.2"),
        misconfigured=(
            Misconfigured(
                "wrong-password",
                {"password": SecretStr("wrong")},
                Raised(T, "auth_failed", AtLeast(60)),
            ),
            Misconfigured(
                "no-login", {"username": None, "password": None}, Raised(T, "auth_failed")
            ),
            Misconfigured("untrusted-certificate", {"ca_file": None}, Raised(T, UNCHECKED)),
        ),
        # The simulator's latency delays its reply to RCPT: the message has not left, so
        # not ambiguous. The ambiguous end of DATA is test_provider_smtp's
        # test_no_reply_to_the_end_of_data_is_ambiguous_and_not_sent_again.
        ambiguous=Ambiguous(
            on_ambiguous="retry", marked=False, says="Timed out waiting for server response"
        ),
        refused=Raised(T, UNCHECKED),
        inbound=NotApplicable(
            "bounces come back as DSN mail to the bounce listener, not as callbacks to "
            "/v1/webhooks (tests/integration/test_smtp_bounces.py)"
        ),
    )


class Twilio(Contract):
    name, state = "twilio", "twilio"
    to = "+15551230001"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "account_sid": sim.config.twilio_account_sid,
            "auth_token": sim.config.twilio_auth_token,
            "from_number": "+15005550006",
            "base_url": sim.url,
            "status_callback_url": "https://tidings.example/v1/webhooks/twilio",
            "timeout": 5,
        }
        return TwilioAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, TwilioAccount)
        return TwilioProvider("twilio-main", account)

    def message(self, sim: Simulator) -> Message:
        return _sms(self.to)

    auth_tokens: ClassVar = {"twilio-main": "auth-token-of-the-test", OTHER: "token-of-another"}

    def config(self, tmp_path: Path) -> SimulatorConfig:
        token = self.auth_tokens["twilio-main"]
        return SimulatorConfig(credentials_dir=tmp_path / "credentials", twilio_auth_token=token)

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        # Callbacks go to tidings' public URL for the delivery (no fixed callback URL).
        return self.account(sim, auth_token=self.auth_tokens[name], status_callback_url=None)

    def inbound_adapter(self, sim: Simulator, public_url: str) -> Provider:
        account = self.receiving(sim, "twilio-main")
        assert isinstance(account, TwilioAccount)
        return TwilioProvider("twilio-main", account, public_url=public_url)

    def delivered(self, sent: Sent) -> Any:
        sid = sent.provider_msg_id
        return {
            "MessageSid": sid,
            "SmsSid": sid,
            "MessageStatus": "delivered",
            "SmsStatus": "delivered",
            "AccountSid": "AC0123456789abcdef0123456789abcdef",
            "From": "+15005550006",
            "To": sent.address,
            "ApiVersion": "2010-04-01",
        }

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        url = sent.payload["StatusCallback"].replace("/twilio-main?", f"/{account}?")
        token = "wrong-token" if forged else self.auth_tokens[account]
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            SIGNATURE_HEADER: compute_signature(token, url, event),
        }
        parts = urlsplit(url)
        return Callback(f"{parts.path}?{parts.query}", urlencode(event).encode(), headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("21211", Raised(P, "invalid_number", effect=SUPPRESS)),
            Answer("21610", Raised(P, "unsubscribed_stop", effect=SUPPRESS)),
            Answer("21614", Raised(P, "not_mobile", effect=SUPPRESS)),
            Answer("21999", Raised(P, "twilio_21999")),
            # Our configuration (a wrong From, a region not enabled), not the message:
            # retried late (an operator can fix it) instead of dead-lettering every SMS.
            Answer("21408", Raised(T, "region_not_enabled", AtLeast(300))),
            Answer("21606", Raised(T, "from_not_capable", AtLeast(300))),
            Answer("21659", Raised(T, "from_invalid", AtLeast(300))),
            Answer("20008", Raised(T, "forbidden", AtLeast(300))),  # a 403
            Answer("20429", Raised(T, UNCHECKED, Above(0))),
            Answer("20500", Raised(T, UNCHECKED, says="500")),
        ),
        rate_limited=Raised(T, UNCHECKED, says="429 20429"),
        outage=Raised(T, UNCHECKED, says="503"),
        misconfigured=(
            Misconfigured(
                "wrong-token",
                {"auth_token": "not-the-token"},
                Raised(T, "auth_failed", AtLeast(60), says="20003"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "twilio",
            "sms",
            "+5511912345678",
            replay="deduplicated",
            # An API key sends; only the auth token verifies Twilio's signatures.
            unconfigured={
                "auth_token": None,
                "api_key_sid": "SK0123456789abcdef0123456789abcdef",
                "api_key_secret": "an-api-key-secret",
            },
        ),
    )


class Vonage(Contract):
    name, state = "vonage", "vonage"
    to = "+447700900123"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields = sim.http["vonage"].account(timeout=5) | changes  # type: ignore[attr-defined]
        return VonageAccount.model_validate(fields)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, VonageAccount)
        return VonageProvider("vonage-main", account)

    def message(self, sim: Simulator) -> Message:
        return _sms(self.to)

    def scripted(self, message: Message) -> str:
        return message.address.removeprefix("+")

    signature_secrets: ClassVar = {
        "vonage-main": "a-signature-secret-for-the-tests-0123456789",
        OTHER: "the-signature-secret-of-another-account-0123",
    }

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        return self.account(sim, signature_secret=self.signature_secrets[name])

    def delivered(self, sent: Sent) -> Any:
        return {
            "message_uuid": sent.provider_msg_id,
            "to": sent.address.removeprefix("+"),
            "from": "447700900001",
            "timestamp": datetime.now(UTC).isoformat(),
            "status": "delivered",
            "channel": "sms",
            "client_ref": sent.delivery_id,
        }

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        body = json.dumps(event).encode()
        secret = (
            "not-the-secret-of-this-account-0123456789"
            if forged
            else self.signature_secrets[account]
        )
        token = vonage_sign(secret, body, "k", "app", time.time())
        headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
        return Callback(f"/v1/webhooks/vonage/{account}", body, headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("402", Raised(T, "low_balance", 300, says="vonage")),
            Answer("403", Raised(T, "forbidden", 300, says="vonage")),
            Answer("429", Raised(T, "rate_limited", 1.0, says="vonage")),
            Answer("rate_limited", Raised(T, "rate_limited", 1.0, says="vonage")),
            Answer("500", Raised(T, "http_500", None, says="vonage")),
            Answer("outage", Raised(T, "http_503", None, says="vonage")),
            Answer("422", Raised(P, "http_422", None, says="vonage")),
            Answer("invalid_number", Raised(P, "invalid_number", effect=SUPPRESS)),
        ),
        rate_limited=Raised(T, "rate_limited", 1.0, says="vonage"),
        outage=Raised(T, "http_503", None, says="vonage"),
        misconfigured=(
            Misconfigured(
                "wrong-secret", {"api_secret": "not-the-secret"}, Raised(T, "auth_failed", 300)
            ),
            Misconfigured("wrong-key", {"api_key": "ffffffff"}, Raised(T, "auth_failed", 300)),
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "vonage",
            "sms",
            "+447700900123",
            replay="deduplicated",
            unconfigured={"signature_secret": None},
        ),
    )


class Apns(Contract):
    name, state = "apns", "apns"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        return ApnsAccount.model_validate(sim.http["apns"].account(**changes))  # type: ignore[attr-defined]

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, ApnsAccount)
        return ApnsProvider("apns-main", account)

    def message(self, sim: Simulator) -> Message:
        return push(secrets.token_hex(32))

    capabilities = Capabilities(
        # The adapter makes the apns-id the delivery id: a repeat carries the same one.
        repeat=Repeat(same_id=True),
        answers=(
            Answer("BadDeviceToken", Raised(P, "BadDeviceToken", effect=DEACTIVATE)),
            Answer(
                "DeviceTokenNotForTopic", Raised(P, "DeviceTokenNotForTopic", effect=DEACTIVATE)
            ),
            Answer("Unregistered", Raised(P, "Unregistered", effect=DEACTIVATE)),
            Answer("ExpiredToken", Raised(P, "ExpiredToken", effect=DEACTIVATE)),
            Answer("BadCollapseId", Raised(P, "BadCollapseId")),
            Answer("BadTopic", Raised(P, "BadTopic")),
            Answer("TopicDisallowed", Raised(P, "TopicDisallowed")),
            Answer("DuplicateHeaders", Raised(P, "DuplicateHeaders")),
            Answer("BadPath", Raised(P, "BadPath")),
            Answer("PayloadTooLarge", Raised(X, "PayloadTooLarge")),
            Answer("IdleTimeout", Raised(T, "IdleTimeout")),
            Answer("TooManyRequests", Raised(T, "TooManyRequests")),
            Answer("InternalServerError", Raised(T, "InternalServerError")),
            Answer("ServiceUnavailable", Raised(T, "ServiceUnavailable")),
            Answer("Shutdown", Raised(T, "Shutdown")),
            # Credential errors keep the token and retry late.
            Answer("InvalidProviderToken", Raised(T, "InvalidProviderToken", AtLeast(300))),
            Answer("MissingProviderToken", Raised(T, "MissingProviderToken")),
            Answer("BadCertificateEnvironment", Raised(T, "BadCertificateEnvironment")),
            Answer("Forbidden", Raised(T, "Forbidden", AtLeast(300))),
            Answer("BadCertificate", Raised(T, UNCHECKED, AtLeast(300))),
            Answer("UnrelatedKeyIdInToken", Raised(T, UNCHECKED, AtLeast(300))),
            Answer("TooManyProviderTokenUpdates", Raised(T, "TooManyProviderTokenUpdates")),
        ),
        rate_limited=Raised(T, "TooManyRequests"),
        outage=Raised(T, "ServiceUnavailable"),
        misconfigured=(
            Misconfigured(
                "other-signing-key",
                {
                    "private_key_file": None,
                    "private_key": _pem(ec.generate_private_key(ec.SECP256R1())),
                },
                Raised(T, "InvalidProviderToken"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        inbound=NotApplicable("APNs answers each push and makes no callbacks"),
    )


def _fcm_other_key(sim: Simulator) -> dict[str, Any]:
    info = json.loads(sim.http["fcm"].service_account_path.read_text())  # type: ignore[attr-defined]
    info["private_key"] = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    return {"service_account_file": None, "service_account_json": json.dumps(info)}


class Fcm(Contract):
    name, state = "fcm", "fcm"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        return FcmAccount.model_validate(sim.http["fcm"].account(**changes))  # type: ignore[attr-defined]

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, FcmAccount)
        return FcmProvider("fcm-main", account)

    def message(self, sim: Simulator) -> Message:
        return push("fcm-" + secrets.token_urlsafe(40))

    def unreachable(self, sim: Simulator, url: str) -> tuple[AccountSettings, Message]:
        return self.account(sim, token_uri=f"{url}/token"), self.message(sim)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("UNREGISTERED", Raised(P, "UNREGISTERED", effect=DEACTIVATE)),
            Answer("SENDER_ID_MISMATCH", Raised(T, "SENDER_ID_MISMATCH", 300.0)),
            Answer("INVALID_ARGUMENT", Raised(P, "INVALID_ARGUMENT")),
            Answer("QUOTA_EXCEEDED", Raised(T, "QUOTA_EXCEEDED", 1.0)),
            Answer("UNAVAILABLE", Raised(T, "UNAVAILABLE", 1.0)),
            Answer("INTERNAL", Raised(T, "INTERNAL", None)),
            Answer("THIRD_PARTY_AUTH_ERROR", Raised(T, "THIRD_PARTY_AUTH_ERROR", 300.0)),
            Answer("UNSPECIFIED_ERROR", Raised(T, "UNSPECIFIED_ERROR")),
        ),
        rate_limited=Raised(T, "QUOTA_EXCEEDED", 1.0),
        outage=Raised(T, "UNAVAILABLE", 1.0),
        misconfigured=(
            Misconfigured(
                "other-service-account-key",
                _fcm_other_key,
                Raised(T, "oauth:invalid_grant", AtLeast(300)),
            ),
            Misconfigured(
                "project-without-permission", {"project_id": "someone-else"}, Raised(T, "403")
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        inbound=NotApplicable("FCM answers each message and makes no callbacks"),
    )


class WebPush(Contract):
    name, state = "webpush", "webpush"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields = sim.http["webpush"].account(timeout=5) | changes  # type: ignore[attr-defined]
        return WebPushAccount.model_validate(fields)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, WebPushAccount)
        return WebPushProvider("webpush-main", account)

    def message(self, sim: Simulator, base_url: str | None = None) -> Message:
        subscription = sim.http["webpush"].subscribe(base_url=base_url)  # type: ignore[attr-defined]
        return push(json.dumps(subscription))

    def scripted(self, message: Message) -> str:
        return str(json.loads(message.address)["endpoint"])

    def unreachable(self, sim: Simulator, url: str) -> tuple[AccountSettings, Message]:
        return self.account(sim), self.message(sim, base_url=url)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("413", Raised(X, "payload_too_large", None)),
            Answer("429", Raised(T, "rate_limited", 1.0)),
            Answer("rate_limited", Raised(T, "rate_limited", 1.0)),
            Answer("500", Raised(T, "http_500", 1.0)),
            Answer("outage", Raised(T, "http_503", 1.0)),
            Answer("400", Raised(T, "bad_request", 300.0)),
            Answer("401", Raised(T, "vapid_unauthorized", 300.0)),
            Answer("403", Raised(T, "vapid_forbidden", 300.0)),
            Answer("404", Raised(P, "subscription_not_found", None, effect=DEACTIVATE)),
            Answer("409", Raised(P, "http_409", None)),
        ),
        rate_limited=Raised(T, "rate_limited", 1.0),
        outage=Raised(T, "http_503", 1.0),
        misconfigured=(
            Misconfigured(
                "private-target",
                {"allow_private": False},
                Raised(P, "private_target"),
                before_any_request=True,
            ),
            Misconfigured(
                "insecure-target",
                {"allow_insecure": False},
                Raised(P, "insecure_target"),
                before_any_request=True,
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="retry"),
        refused=Raised(T, UNCHECKED),
        inbound=NotApplicable("a push service answers each push and makes no callbacks"),
    )


class Webhook(Contract):
    """The outbound webhook channel: a producer's endpoint, the simulator's receiver."""

    name, state = "webhook", "webhook"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "secret": sim.config.webhook_secret,
            "allow_private": True,  # the simulator listens on loopback
            "allow_insecure": True,  # over plain http
        }
        return WebhookAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, WebhookAccount)
        return WebhookProvider("hooks", account)

    def message(self, sim: Simulator, url: str | None = None) -> Message:
        address = url or f"{sim.url}/webhook-receiver/orders"
        body = Content(data={"order": 42, "state": "shipped"})
        return message(Channel.WEBHOOK, address, body, type="order.shipped")

    def scripted(self, message: Message) -> str:
        return message.address.rsplit("/", 1)[1]

    def unreachable(self, sim: Simulator, url: str) -> tuple[AccountSettings, Message]:
        return self.account(sim), self.message(sim, url=f"{url}/hook")

    capabilities = Capabilities(
        # The webhook id is the delivery id: stable across retries, the receiver dedupes.
        repeat=Repeat(same_id=True),
        answers=(
            Answer("410", Raised(P, "endpoint_gone", effect=SUPPRESS)),
            Answer("429", Raised(T, "rate_limited", 1.0)),
            Answer("500", Raised(T, "http_500", 1.0)),
            Answer("502", Raised(T, "http_502", 1.0)),
            Answer("503", Raised(T, "http_503", 1.0)),
            Answer("504", Raised(T, "http_504", 1.0)),
            # A receiver being deployed may answer 404 (route not there yet), 401/403 (secret
            # not there yet) or 400 for a while: retried, never the end of the delivery.
            Answer("400", Raised(T, "http_400")),
            Answer("401", Raised(T, "http_401")),
            Answer("403", Raised(T, "http_403")),
            Answer("404", Raised(T, "http_404")),
        ),
        rate_limited=Raised(T, "rate_limited", 1.0),
        outage=Raised(T, UNCHECKED, says="503"),
        misconfigured=(
            Misconfigured(
                "wrong-secret", {"secret": "whsec_d3Jvbmctc2VjcmV0"}, Raised(T, "http_401")
            ),
        ),
        # A timeout is not marked ambiguous: the receiver dedupes a retry by its webhook id.
        ambiguous=Ambiguous(on_ambiguous="retry", marked=False, says="webhook timeout"),
        refused=Raised(T, UNCHECKED),
        inbound=NotApplicable(
            "the webhook channel is outbound only: the producer's receiver verifies what "
            "tidings signs (the misconfigured case: another secret is refused)"
        ),
    )


CHAT = Content(subject="Order shipped", text="Your order *42* has shipped.")
NO_INBOUND_SLACK = NotApplicable(
    "Slack reports no delivery or read status for bot messages: SENT is the last word"
)
# Chat services answer a configuration error (a revoked token) as such: retried late.
CONFIG_WAIT = AtLeast(300)


class Slack(Contract):
    """Slack's Web API: chat.postMessage to a conversation id with the bot token."""

    name, state = "slack", "slack"
    to = "C0123ABCDE"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "bot_token": sim.config.slack_bot_token,
            "base_url": f"{sim.url}/api",
            "webhooks_base_url": sim.url,
            "timeout": 5,
        }
        return SlackAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, SlackAccount)
        return SlackProvider("slack-main", account)

    def message(self, sim: Simulator) -> Message:
        return message(Channel.SLACK, self.to, CHAT)

    def unreachable(self, sim: Simulator, url: str) -> tuple[AccountSettings, Message]:
        return self.account(sim, base_url=f"{url}/api"), self.message(sim)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("channel_not_found", Raised(P, "channel_not_found")),
            Answer("not_in_channel", Raised(P, "not_in_channel")),
            Answer("is_archived", Raised(P, "is_archived")),
            Answer("msg_too_long", Raised(X, "msg_too_long")),
            Answer("invalid_blocks", Raised(X, "invalid_blocks")),
            Answer("invalid_auth", Raised(T, "invalid_auth", CONFIG_WAIT)),
            Answer("account_inactive", Raised(T, "account_inactive", CONFIG_WAIT)),
            Answer("token_revoked", Raised(T, "token_revoked", CONFIG_WAIT)),
            Answer("missing_scope", Raised(T, "missing_scope", CONFIG_WAIT)),
            Answer("ratelimited", Raised(T, "rate_limited", 1.0)),
            Answer("internal_error", Raised(T, "internal_error")),
            Answer("service_unavailable", Raised(T, "service_unavailable", says="503")),
        ),
        rate_limited=Raised(T, "rate_limited", 1.0, says="429 ratelimited"),
        outage=Raised(T, UNCHECKED, says="503"),
        misconfigured=(
            Misconfigured(
                "wrong-token",
                {"bot_token": "xoxb-not-the-token"},
                Raised(T, "invalid_auth", CONFIG_WAIT),
            ),
            Misconfigured(
                "no-token",
                {"bot_token": None},
                Raised(T, "no_bot_token", CONFIG_WAIT),
                before_any_request=True,
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=NO_INBOUND_SLACK,
    )


class SlackWebhook(Slack):
    """Slack's incoming webhooks: the address is the webhook's URL, no token needed."""

    name = "slack-webhook"
    to = "https://hooks.slack.com/services/T0SIM0001/B0SIM0001/s3cr3tHookToken"

    def unreachable(self, sim: Simulator, url: str) -> tuple[AccountSettings, Message]:
        return self.account(sim, webhooks_base_url=url), self.message(sim)

    capabilities = Capabilities(
        repeat=Repeat(same_id=True),  # a webhook answers no id: the delivery id is the one
        answers=(
            # A webhook removed, or its channel gone: its URL is never used again.
            Answer("no_service", Raised(P, "no_service", effect=SUPPRESS)),
            Answer("channel_not_found", Raised(P, "channel_not_found", effect=SUPPRESS)),
            Answer("channel_is_archived", Raised(P, "channel_is_archived", effect=SUPPRESS)),
            Answer("no_active_hooks", Raised(P, "no_active_hooks", effect=SUPPRESS)),
            Answer("action_prohibited", Raised(P, "action_prohibited")),
            Answer("invalid_payload", Raised(X, "invalid_payload")),
            Answer("invalid_token", Raised(T, "invalid_token", CONFIG_WAIT)),
            Answer("team_disabled", Raised(T, "team_disabled", CONFIG_WAIT)),
            Answer("rollup_error", Raised(T, "rollup_error", says="500")),
        ),
        rate_limited=Raised(T, "rate_limited", 1.0, says="429"),
        outage=Raised(T, UNCHECKED, says="503"),
        misconfigured=NotApplicable(
            "an incoming webhook's URL is its credential, and it is the address: a wrong one "
            "is the no_service answer (suppressed)"
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=NO_INBOUND_SLACK,
    )


class Discord(Contract):
    """Discord's Execute Webhook: the address is the webhook's URL (its token inside)."""

    name, state = "discord", "discord"
    to = "https://discord.com/api/webhooks/112233445566778899/" + "T0k3n-of_the-webhook" * 3

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {"base_url": sim.url, "timeout": 5}
        return DiscordAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, DiscordAccount)
        return DiscordProvider("discord-main", account)

    def message(self, sim: Simulator) -> Message:
        return message(Channel.DISCORD, self.to, CHAT)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            # The webhook deleted, or its token wrong: the URL never works again.
            Answer("10015", Raised(P, "unknown_webhook", effect=SUPPRESS, says="404")),
            Answer("50027", Raised(P, "invalid_webhook_token", effect=SUPPRESS, says="401")),
            Answer("50013", Raised(P, "missing_permissions", says="403")),
            Answer("50035", Raised(X, "invalid_form_body")),
            Answer("50006", Raised(X, "empty_message")),
            # A webhook's own limit delays its delivery; the global one the whole account.
            Answer("global_rate_limited", Raised(T, "rate_limited", 0.75, says="global")),
            Answer("0", Raised(T, "http_500", says="500")),
        ),
        rate_limited=Raised(T, "rate_limited_route", 0.75, says="429"),
        outage=Raised(T, UNCHECKED, says="503"),
        misconfigured=NotApplicable(
            "a Discord account has no credentials: each webhook's URL carries its token, "
            "and a wrong one is the 50027 answer (suppressed)"
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=NotApplicable("Discord reports nothing back to a webhook's sender"),
    )


class Telegram(Contract):
    """Telegram's Bot API: sendMessage to a chat id with the bot token."""

    name, state = "telegram", "telegram"
    to = "421337001"

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "bot_token": sim.config.telegram_bot_token,
            "base_url": sim.url,
            "timeout": 5,
        }
        return TelegramAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, TelegramAccount)
        return TelegramProvider("telegram-main", account)

    def message(self, sim: Simulator) -> Message:
        return message(Channel.TELEGRAM, self.to, CHAT)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            # The chat is gone for this bot: the address is deactivated (suppressed).
            Answer("blocked", Raised(P, "bot_blocked", effect=SUPPRESS, says="blocked")),
            Answer("user_deactivated", Raised(P, "user_deactivated", effect=SUPPRESS)),
            Answer("kicked", Raised(P, "bot_kicked", effect=SUPPRESS)),
            Answer("cannot_initiate", Raised(P, "forbidden")),
            Answer("chat_not_found", Raised(P, "chat_not_found")),
            Answer("internal", Raised(T, "http_500")),
            Answer("bad_gateway", Raised(T, "http_502")),
        ),
        rate_limited=Raised(T, "rate_limited", 1.0, says="429"),
        outage=Raised(T, UNCHECKED, says="502"),
        misconfigured=(
            Misconfigured(
                "wrong-token",
                {"bot_token": "987654321:not-the-token-of-this-bot-at-all"},
                Raised(T, "unauthorized", CONFIG_WAIT, says="401"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=NotApplicable(
            "Telegram reports no delivery status; a block is learnt from the 403 on the next "
            "send (the my_chat_member update is not received yet)"
        ),
    )


class Teams(Contract):
    """A Teams Workflows webhook: the address is the workflow's URL, its signature inside."""

    name, state = "teams", "teams"
    to = (
        "https://prod-42.westeurope.logic.azure.com:443/workflows/7f3a9c0d2b1e4f5a8c6d"
        "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun"
        "&sv=1.0&sig=k3yS1gnatureOfTheWorkflow"
    )

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {"base_url": sim.url, "timeout": 5}
        return TeamsAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, TeamsAccount)
        return TeamsProvider("teams-main", account)

    def message(self, sim: Simulator) -> Message:
        return message(Channel.TEAMS, self.to, CHAT)

    def scripted(self, message: Message) -> str:
        return message.address.split("/workflows/")[1].split("/")[0]

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            # The workflow deleted, or the URL's signature wrong: never used again.
            Answer("404", Raised(P, "workflow_not_found", effect=SUPPRESS)),
            Answer("401", Raised(P, "invalid_signature", effect=SUPPRESS)),
            Answer("409", Raised(P, "workflow_disabled")),
            Answer("403", Raised(P, "http_403")),
            Answer("400", Raised(X, "invalid_card")),
            Answer("500", Raised(T, "http_500")),
            Answer("502", Raised(T, "http_502")),
        ),
        rate_limited=Raised(T, "rate_limited_route", 1.0, says="429"),
        outage=Raised(T, UNCHECKED, says="503"),
        misconfigured=NotApplicable(
            "a Teams account has no credentials: each workflow's URL carries its signature, "
            "and a wrong one is the 401 answer (suppressed)"
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=NotApplicable("a Teams workflow reports nothing back to its caller"),
    )


class WhatsApp(Contract):
    """WhatsApp's Cloud API: an approved template to a number; statuses signed back."""

    name, state = "whatsapp", "whatsapp"
    to = "+5511912345678"
    app_secrets: ClassVar = {"whatsapp-main": "app-secret-of-the-test", OTHER: "another-app"}

    def config(self, tmp_path: Path) -> SimulatorConfig:
        secret = self.app_secrets["whatsapp-main"]
        return SimulatorConfig(credentials_dir=tmp_path / "credentials", whatsapp_app_secret=secret)

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "phone_number_id": sim.config.whatsapp_phone_number_id,
            "access_token": sim.config.whatsapp_access_token,
            "base_url": sim.url,
            "timeout": 5,
        }
        return WhatsAppAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, WhatsAppAccount)
        return WhatsAppProvider("whatsapp-main", account)

    def message(self, sim: Simulator) -> Message:
        words = {"template": "order_update", "language": "pt_BR", "1": "42"}
        return message(Channel.WHATSAPP, self.to, Content(data=words))

    def scripted(self, message: Message) -> str:
        return message.address.removeprefix("+")

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        return self.account(sim, app_secret=self.app_secrets[name])

    def delivered(self, sent: Sent) -> Any:
        status = {
            "id": sent.provider_msg_id,
            "status": "delivered",
            "timestamp": "1796644800",
            "recipient_id": sent.address.removeprefix("+"),
            "biz_opaque_callback_data": sent.payload["biz_opaque_callback_data"],
        }
        value = {"messaging_product": "whatsapp", "statuses": [status]}
        change = {"value": value, "field": "messages"}
        return {"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [change]}]}

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        body = json.dumps(event).encode()
        secret = "wrong-secret" if forged else self.app_secrets[account]
        headers = {"Content-Type": "application/json"}
        headers["X-Hub-Signature-256"] = whatsapp_signature(secret, body)
        return Callback(f"/v1/webhooks/whatsapp/{account}", body, headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("131047", Raised(P, "reengagement_required")),
            Answer("131026", Raised(P, "undeliverable")),
            Answer("130429", Raised(T, "rate_limited", 1.0)),
            # Too many to one number: only its delivery waits (the pair rate).
            Answer("131056", Raised(T, "rate_limited_route", 6.0)),
            Answer("132000", Raised(X, "parameter_count_mismatch")),
            # The template or the account is ours to fix: retried late.
            Answer("132001", Raised(T, "template_not_found", CONFIG_WAIT)),
            Answer("368", Raised(T, "temporarily_blocked", CONFIG_WAIT)),
            Answer("131000", Raised(T, "something_went_wrong", says="500")),
        ),
        rate_limited=Raised(T, "rate_limited", 1.0, says="130429"),
        outage=Raised(T, UNCHECKED, says="503"),
        misconfigured=(
            Misconfigured(
                "wrong-token",
                {"access_token": "not-the-token"},
                Raised(T, "access_token_expired", CONFIG_WAIT, says="401"),
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "whatsapp",
            "whatsapp",
            "+5511912345678",
            replay="deduplicated",
            unconfigured={"app_secret": None},
        ),
    )


class TwilioWhatsApp(Contract):
    """Twilio's WhatsApp sender: an approved Content template to whatsapp:+…; status
    callbacks signed X-Twilio-Signature."""

    name, state = "twilio_whatsapp", "twilio"
    to = "+5511912345678"
    content = "HX0123456789abcdef0123456789abcdef"  # the simulator's approved template
    auth_tokens: ClassVar = {"twilio-wa": "auth-token-of-the-test", OTHER: "token-of-another"}

    def config(self, tmp_path: Path) -> SimulatorConfig:
        token = self.auth_tokens["twilio-wa"]
        return SimulatorConfig(credentials_dir=tmp_path / "credentials", twilio_auth_token=token)

    def account(self, sim: Simulator, **changes: Any) -> AccountSettings:
        fields: dict[str, Any] = {
            "account_sid": sim.config.twilio_account_sid,
            "auth_token": sim.config.twilio_auth_token,
            "from_number": sim.config.twilio_whatsapp_senders[0],
            "content_sids": {"order_update:en_US": self.content},
            "base_url": sim.url,
            "status_callback_url": "https://tidings.example/v1/webhooks/twilio_whatsapp/x",
            "timeout": 5,
        }
        return TwilioWhatsAppAccount.model_validate(fields | changes)

    def adapter(self, account: AccountSettings) -> Provider:
        assert isinstance(account, TwilioWhatsAppAccount)
        return TwilioWhatsAppProvider("twilio-wa", account)

    def message(self, sim: Simulator) -> Message:
        words = {"template": "order_update", "language": "en_US", "1": "42"}
        return message(Channel.WHATSAPP, self.to, Content(data=words))

    def scripted(self, message: Message) -> str:
        return "whatsapp:" + message.address

    def receiving(self, sim: Simulator, name: str) -> AccountSettings:
        return self.account(sim, auth_token=self.auth_tokens[name], status_callback_url=None)

    def inbound_adapter(self, sim: Simulator, public_url: str) -> Provider:
        account = self.receiving(sim, "twilio-wa")
        assert isinstance(account, TwilioWhatsAppAccount)
        return TwilioWhatsAppProvider("twilio-wa", account, public_url=public_url)

    def delivered(self, sent: Sent) -> Any:
        sid = sent.provider_msg_id
        return {
            "MessageSid": sid,
            "SmsSid": sid,
            "MessageStatus": "delivered",
            "SmsStatus": "delivered",
            "AccountSid": "AC0123456789abcdef0123456789abcdef",
            "From": "whatsapp:+14155238886",
            "To": "whatsapp:" + sent.address,
            "ApiVersion": "2010-04-01",
            "ChannelPrefix": "whatsapp",
        }

    def callback(
        self, sim: Simulator, sent: Sent, event: Any, account: str, forged: bool
    ) -> Callback:
        url = sent.payload["StatusCallback"].replace("/twilio-wa?", f"/{account}?")
        token = "wrong-token" if forged else self.auth_tokens[account]
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            SIGNATURE_HEADER: compute_signature(token, url, event),
        }
        parts = urlsplit(url)
        return Callback(f"{parts.path}?{parts.query}", urlencode(event).encode(), headers)

    capabilities = Capabilities(
        repeat=Repeat(),
        answers=(
            Answer("21211", Raised(P, "invalid_number", effect=SUPPRESS)),
            Answer("63024", Raised(P, "invalid_recipient", effect=SUPPRESS)),
            Answer("63016", Raised(P, "outside_window")),
            Answer("63018", Raised(T, "rate_limited", 60.0)),
            Answer("20429", Raised(T, "rate_limited", Above(0))),
            Answer("63028", Raised(X, "parameter_count_mismatch")),
            Answer("21656", Raised(X, "content_variables_invalid")),
            # The sender or the template is ours to fix: retried late.
            Answer("63007", Raised(T, "sender_not_found", CONFIG_WAIT)),
            Answer("63027", Raised(T, "template_not_found", CONFIG_WAIT)),
            Answer("21999", Raised(P, "twilio_21999")),
            Answer("20500", Raised(T, UNCHECKED, says="500")),
        ),
        rate_limited=Raised(T, "rate_limited", says="429 20429"),
        outage=Raised(T, UNCHECKED, says="503"),
        misconfigured=(
            Misconfigured(
                "wrong-token",
                {"auth_token": "not-the-token"},
                Raised(T, "auth_failed", CONFIG_WAIT, says="20003"),
            ),
            Misconfigured(
                "unmapped-template", {"content_sids": {}}, Raised(T, "no_content", CONFIG_WAIT)
            ),
        ),
        ambiguous=Ambiguous(on_ambiguous="fail"),
        refused=Raised(T, UNCHECKED),
        inbound=Inbound(
            "twilio_whatsapp",
            "whatsapp",
            "+5511912345678",
            replay="deduplicated",
            unconfigured={
                "auth_token": None,
                "api_key_sid": "SK0123456789abcdef0123456789abcdef",
                "api_key_secret": "an-api-key-secret",
            },
        ),
    )


PROVIDERS: dict[str, Contract] = {
    contract.name: contract
    for contract in (
        SendGrid(),
        Mailgun(),
        Postmark(),
        Resend(),
        SparkPost(),
        Ses(),
        Smtp(),
        Twilio(),
        Vonage(),
        Apns(),
        Fcm(),
        WebPush(),
        Webhook(),
        Slack(),
        SlackWebhook(),
        Discord(),
        Telegram(),
        Teams(),
        WhatsApp(),
        TwilioWhatsApp(),
    )
}
