"""Every kind of provider account, and how to build its provider.

An account in the configuration names its ``kind``; the development kinds (``sink``,
``noop``, ``record``) need no credentials.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from tidings.providers.accounts import AccountSettings
from tidings.providers.apns import ApnsAccount, ApnsProvider
from tidings.providers.base import Provider
from tidings.providers.discord import DiscordAccount, DiscordProvider
from tidings.providers.fcm import FcmAccount, FcmProvider
from tidings.providers.mailgun import MailgunAccount, MailgunProvider
from tidings.providers.postmark import PostmarkAccount, PostmarkProvider
from tidings.providers.resend import ResendAccount, ResendProvider
from tidings.providers.sendgrid import SendGridAccount, SendGridProvider
from tidings.providers.ses import SesAccount, SesProvider
from tidings.providers.sink import NoopProvider, SinkProvider
from tidings.providers.slack import SlackAccount, SlackProvider
from tidings.providers.smtp import SmtpAccount, SmtpProvider
from tidings.providers.sparkpost import SparkPostAccount, SparkPostProvider
from tidings.providers.teams import TeamsAccount, TeamsProvider
from tidings.providers.telegram import TelegramAccount, TelegramProvider
from tidings.providers.testing import RecordingProvider
from tidings.providers.twilio import TwilioAccount, TwilioProvider
from tidings.providers.twilio_whatsapp import TwilioWhatsAppAccount, TwilioWhatsAppProvider
from tidings.providers.vonage import VonageAccount, VonageProvider
from tidings.providers.webhook import WebhookAccount, WebhookProvider
from tidings.providers.webpush import WebPushAccount, WebPushProvider
from tidings.providers.whatsapp import WhatsAppAccount, WhatsAppProvider


class SinkAccount(AccountSettings):
    """The development sink: one JSON file per delivery under ``outbox_dir``."""

    kind: Literal["sink"] = "sink"


class NoopAccount(AccountSettings):
    """Accepts everything, sends nothing (benchmarks of the dispatcher itself)."""

    kind: Literal["noop"] = "noop"


class RecordAccount(AccountSettings):
    """Appends a line per send to ``path`` (tests and demos count sends across processes)."""

    kind: Literal["record"] = "record"
    path: Path
    delay_ms: float = Field(default=0.0, ge=0)


Account = Annotated[
    SinkAccount
    | NoopAccount
    | RecordAccount
    | SmtpAccount
    | SendGridAccount
    | MailgunAccount
    | PostmarkAccount
    | ResendAccount
    | SparkPostAccount
    | SesAccount
    | TwilioAccount
    | FcmAccount
    | ApnsAccount
    | WebhookAccount
    | VonageAccount
    | WebPushAccount
    | SlackAccount
    | DiscordAccount
    | TelegramAccount
    | TeamsAccount
    | WhatsAppAccount
    | TwilioWhatsAppAccount,
    Field(discriminator="kind"),
]


def build_provider(
    name: str, account: AccountSettings, outbox_dir: Path, public_url: str | None = None
) -> Provider:
    """The provider of account ``name``; its name is what deliveries record.

    ``public_url`` is where providers reach tidings (Twilio's default status callback)."""
    provider: Provider
    match account:
        case SinkAccount():
            provider = SinkProvider(outbox_dir)
        case NoopAccount():
            provider = NoopProvider()
        case RecordAccount():
            provider = RecordingProvider(account.path, delay=account.delay_ms / 1000)
        case SmtpAccount():
            provider = SmtpProvider(name, account)
        case SendGridAccount():
            provider = SendGridProvider(name, account)
        case MailgunAccount():
            provider = MailgunProvider(name, account)
        case PostmarkAccount():
            provider = PostmarkProvider(name, account)
        case ResendAccount():
            provider = ResendProvider(name, account)
        case SparkPostAccount():
            provider = SparkPostProvider(name, account)
        case SesAccount():
            provider = SesProvider(name, account)
        case TwilioAccount():
            provider = TwilioProvider(name, account, public_url=public_url)
        case FcmAccount():
            provider = FcmProvider(name, account)
        case ApnsAccount():
            provider = ApnsProvider(name, account)
        case WebhookAccount():
            provider = WebhookProvider(name, account)
        case VonageAccount():
            provider = VonageProvider(name, account)
        case WebPushAccount():
            provider = WebPushProvider(name, account)
        case SlackAccount():
            provider = SlackProvider(name, account)
        case DiscordAccount():
            provider = DiscordProvider(name, account)
        case TelegramAccount():
            provider = TelegramProvider(name, account)
        case TeamsAccount():
            provider = TeamsProvider(name, account)
        case WhatsAppAccount():
            provider = WhatsAppProvider(name, account)
        case TwilioWhatsAppAccount():
            provider = TwilioWhatsAppProvider(name, account, public_url=public_url)
        case _:
            raise ValueError(f"account {name!r}: unknown kind {account.kind!r}")
    return provider
