"""A Twilio account: its SID, how requests authenticate (the auth token, or an API key and
its secret), its sender (a number or a messaging service) and where status callbacks go."""

from __future__ import annotations

from typing import Literal

import httpx
from pydantic import Field, SecretStr, model_validator

from tidings.providers.accounts import AccountSettings, exactly_one


class TwilioAccount(AccountSettings):
    kind: Literal["twilio"] = "twilio"
    account_sid: str = Field(pattern=r"^AC[0-9a-fA-F]{32}$")
    # The account's auth token: it authenticates requests unless an API key is given, and
    # it is what Twilio signs its webhooks with (so callbacks are refused without it).
    auth_token: SecretStr | None = None
    # An API key (SK…) and its secret: Twilio's recommended credentials for requests.
    api_key_sid: str | None = Field(default=None, pattern=r"^SK[0-9a-fA-F]{32}$")
    api_key_secret: SecretStr | None = None
    from_number: str | None = None
    messaging_service_sid: str | None = Field(default=None, pattern=r"^MG[0-9a-fA-F]{32}$")
    base_url: str = "https://api.twilio.com"
    # Where Twilio posts status changes. Unset: {public_url}/v1/webhooks/twilio/{account name}
    # when tidings knows its public URL (the signature covers this exact URL).
    status_callback_url: str | None = None
    # At most once: Twilio has no idempotency key (see AccountSettings.on_ambiguous).
    on_ambiguous: Literal["retry", "fail"] = "fail"

    @model_validator(mode="after")
    def _one_sender(self) -> TwilioAccount:
        return exactly_one(self, "from_number", "messaging_service_sid")

    @model_validator(mode="after")
    def _credentials(self) -> TwilioAccount:
        if (self.api_key_sid is None) != (self.api_key_secret is None):
            raise ValueError("give api_key_sid and api_key_secret together")
        if self.api_key_sid is None and self.auth_token is None:
            raise ValueError("give auth_token, or api_key_sid and api_key_secret")
        return self

    def request_auth(self) -> httpx.BasicAuth:
        """HTTP Basic credentials: the API key if there is one, else SID and auth token."""
        if self.api_key_sid is not None and self.api_key_secret is not None:
            return httpx.BasicAuth(self.api_key_sid, self.api_key_secret.get_secret_value())
        assert self.auth_token is not None
        return httpx.BasicAuth(self.account_sid, self.auth_token.get_secret_value())
