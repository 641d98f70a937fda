"""A SendGrid account: its API key, its default sender, and the key that verifies its signed
Event Webhook."""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr, field_validator

from tidings.providers.accounts import AccountSettings
from tidings.providers.sendgrid.signature import load_public_key


class SendGridAccount(AccountSettings):
    kind: Literal["sendgrid"] = "sendgrid"
    api_key: SecretStr
    base_url: str = "https://api.sendgrid.com"
    from_email: str
    from_name: str | None = None
    # The Event Webhook's verification key (base64 DER SubjectPublicKeyInfo, as SendGrid's
    # settings show it). Unset: tidings refuses this account's webhooks (never unsigned).
    event_webhook_public_key: str | None = None

    @field_validator("event_webhook_public_key")
    @classmethod
    def _key_loads(cls, value: str | None) -> str | None:
        if value is not None:
            load_public_key(value)  # refuse a bad key at start-up, not at the first webhook
        return value
