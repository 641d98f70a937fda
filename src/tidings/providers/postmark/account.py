"""A Postmark account: its server token, its default sender and message streams, and the
Basic credentials its webhook URL carries."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from tidings.providers.accounts import AccountSettings

# Postmark's default streams: every server has "outbound"; "broadcast" is the usual name of
# the broadcasts stream, which Postmark requires for bulk (marketing) mail.
DEFAULT_STREAMS = {"transactional": "outbound", "reminder": "outbound", "marketing": "broadcast"}


class PostmarkAccount(AccountSettings):
    kind: Literal["postmark"] = "postmark"
    server_token: SecretStr
    # A confirmed sender signature, or an address of a verified domain.
    from_email: str
    from_name: str | None = None
    base_url: str = "https://api.postmarkapp.com"
    # Category -> message stream id; categories not given keep DEFAULT_STREAMS.
    message_streams: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_STREAMS))
    # The Basic auth credentials put in the webhook URL in Postmark (Postmark does not sign
    # its webhooks). Unset: tidings refuses this account's webhooks.
    webhook_username: str | None = None
    webhook_password: SecretStr | None = None

    @field_validator("message_streams")
    @classmethod
    def _over_defaults(cls, streams: dict[str, str]) -> dict[str, str]:
        unknown = set(streams) - set(DEFAULT_STREAMS)
        if unknown:
            raise ValueError(f"message_streams: unknown categories {sorted(unknown)}")
        return DEFAULT_STREAMS | streams

    @model_validator(mode="after")
    def _webhook_credentials_together(self) -> PostmarkAccount:
        if (self.webhook_username is None) != (self.webhook_password is None):
            raise ValueError("give webhook_username and webhook_password together")
        return self

    def stream_for(self, category: str) -> str:
        return self.message_streams.get(category, DEFAULT_STREAMS["transactional"])
