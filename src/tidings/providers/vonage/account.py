"""A Vonage account: its sender, how requests authenticate (HTTP Basic with the API key
and secret, or an application JWT: ``auth.py``), and the secret that signs its callbacks."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import httpx
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from pydantic import Field, SecretStr, model_validator

from tidings.providers.accounts import AccountSettings, exactly_one
from tidings.providers.vonage.auth import ApplicationJwt, load_rsa_key


class VonageAccount(AccountSettings):
    kind: Literal["vonage"] = "vonage"
    # A number in E.164 (the + is dropped on the wire) or an alphanumeric sender ID.
    sender: str = Field(pattern=r"^(\+?[1-9][0-9]{6,14}|[A-Za-z0-9][A-Za-z0-9 ]{0,10})$")
    # HTTP Basic credentials, or an application and its private key (a JWT per request).
    api_key: str | None = None
    api_secret: SecretStr | None = None
    application_id: str | None = Field(default=None, min_length=1, max_length=64)
    private_key: SecretStr | None = None
    private_key_file: Path | None = None
    # Vonage signs status webhooks with it (HS256); unset, tidings refuses them.
    signature_secret: SecretStr | None = None
    base_url: str = "https://api.nexmo.com"
    # At most once: the Messages API has no idempotency key (see AccountSettings).
    on_ambiguous: Literal["retry", "fail"] = "fail"

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> VonageAccount:
        basic = (self.api_key, self.api_secret)
        if (basic[0] is None) != (basic[1] is None):
            raise ValueError("give api_key and api_secret together")
        if self.application_id is None and (self.private_key or self.private_key_file):
            raise ValueError("a private key needs its application_id")
        if self.application_id is not None:
            exactly_one(self, "private_key", "private_key_file")
            if self.api_key is not None:
                raise ValueError("give api_key/api_secret or an application, not both")
            self.application_key()  # refuse an unreadable key at start-up
        elif self.api_key is None:
            raise ValueError("give api_key and api_secret, or application_id and a private key")
        return self

    def application_key(self) -> RSAPrivateKey:
        try:
            if self.private_key is not None:
                return load_rsa_key(self.private_key.get_secret_value())
            assert self.private_key_file is not None
            return load_rsa_key(self.private_key_file.read_text())
        except (OSError, ValueError, TypeError) as error:
            raise ValueError(f"unreadable Vonage application private key: {error}") from None

    def request_auth(self) -> httpx.Auth:
        if self.api_key is not None and self.api_secret is not None:
            return httpx.BasicAuth(self.api_key, self.api_secret.get_secret_value())
        assert self.application_id is not None
        return ApplicationJwt(self.application_id, self.application_key())
