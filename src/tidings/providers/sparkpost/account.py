"""A SparkPost account: its API key, its default sender, and how its webhooks prove they
are SparkPost's (Basic credentials, or the token of the webhook's ``auth_token``)."""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr, model_validator

from tidings.providers.accounts import AccountSettings


class SparkPostAccount(AccountSettings):
    kind: Literal["sparkpost"] = "sparkpost"
    api_key: SecretStr
    # https://api.eu.sparkpost.com for an EU account.
    base_url: str = "https://api.sparkpost.com"
    # An address of a sending domain verified at SparkPost.
    from_email: str
    from_name: str | None = None
    # The webhook's credentials at SparkPost: Basic (auth_type "basic"), or the token
    # SparkPost sends in X-MessageSystems-Webhook-Token. Neither: webhooks are refused.
    webhook_username: str | None = None
    webhook_password: SecretStr | None = None
    webhook_token: SecretStr | None = None

    @model_validator(mode="after")
    def _webhook_credentials(self) -> SparkPostAccount:
        if (self.webhook_username is None) != (self.webhook_password is None):
            raise ValueError("give webhook_username and webhook_password together")
        return self

    @property
    def webhooks_configured(self) -> bool:
        return self.webhook_password is not None or self.webhook_token is not None
