"""A Resend account: its API key, its default sender, and the signing secret of its
webhooks (Svix, ``whsec_...``)."""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr, field_validator

from tidings.providers.accounts import AccountSettings
from tidings.providers.resend.signature import decode_secret


class ResendAccount(AccountSettings):
    kind: Literal["resend"] = "resend"
    api_key: SecretStr
    base_url: str = "https://api.resend.com"
    # An address of a domain verified at Resend.
    from_email: str
    from_name: str | None = None
    # The webhook's signing secret as Resend shows it (``whsec_`` + base64). Unset: tidings
    # refuses this account's webhooks (never unsigned).
    webhook_secret: SecretStr | None = None

    @field_validator("webhook_secret")
    @classmethod
    def _secret_decodes(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            decode_secret(value.get_secret_value())  # refuse a bad secret at start-up
        return value
