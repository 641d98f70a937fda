"""A Twilio account's WhatsApp sender: its SID and auth token (which also verifies Twilio's
callbacks), the sender's number, and the approved Content templates by the WhatsApp
template name and language a tidings template names."""

from __future__ import annotations

from typing import Literal

import httpx
from pydantic import Field, SecretStr, model_validator

from tidings.providers.accounts import AccountSettings


class TwilioWhatsAppAccount(AccountSettings):
    kind: Literal["twilio_whatsapp"] = "twilio_whatsapp"
    account_sid: str = Field(pattern=r"^AC[0-9a-fA-F]{32}$")
    # Verifies Twilio's callbacks (X-Twilio-Signature), and authenticates requests unless
    # an API key (SK…) and its secret are given; without it callbacks are refused.
    auth_token: SecretStr | None = None
    api_key_sid: str | None = Field(default=None, pattern=r"^SK[0-9a-fA-F]{32}$")
    api_key_secret: SecretStr | None = None
    from_number: str = Field(pattern=r"^\+[1-9][0-9]{6,14}$")  # the WhatsApp sender
    # "template:language" -> the Content template's SID (HX…) approved for it, so that one
    # tidings template serves Meta's Cloud API and Twilio alike; data.contentSid wins.
    content_sids: dict[str, str] = Field(default_factory=dict)
    base_url: str = "https://api.twilio.com"
    # Unset: {public_url}/v1/webhooks/twilio_whatsapp/{account name}.
    status_callback_url: str | None = None
    # No idempotency key on the Messages API: a send whose answer was lost is failed.
    on_ambiguous: Literal["retry", "fail"] = "fail"

    @model_validator(mode="after")
    def _credentials(self) -> TwilioWhatsAppAccount:
        if (self.api_key_sid is None) != (self.api_key_secret is None):
            raise ValueError("give api_key_sid and api_key_secret together")
        if self.api_key_sid is None and self.auth_token is None:
            raise ValueError("give auth_token, or api_key_sid and api_key_secret")
        return self

    def request_auth(self) -> httpx.BasicAuth:
        if self.api_key_sid is not None and self.api_key_secret is not None:
            return httpx.BasicAuth(self.api_key_sid, self.api_key_secret.get_secret_value())
        assert self.auth_token is not None
        return httpx.BasicAuth(self.account_sid, self.auth_token.get_secret_value())
