"""An SES account: its region and AWS credentials, its default sender and configuration set,
and the SNS topics its notifications may come from."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from tidings.providers.accounts import AccountSettings
from tidings.providers.mime import wire_address

_REGION = r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$"


_TOPIC_ARN = r"^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d{1,2}:\d{12}:[A-Za-z0-9_-]{1,256}$"


class SesAccount(AccountSettings):
    kind: Literal["ses"] = "ses"
    access_key_id: str = Field(pattern=r"^[A-Z0-9]{16,128}$")
    secret_access_key: SecretStr
    session_token: SecretStr | None = None  # temporary credentials (STS)
    region: str = Field(pattern=_REGION)
    base_url: str | None = None  # default https://email.{region}.amazonaws.com
    from_email: str  # a verified identity (address or domain) of the account
    from_name: str | None = None
    configuration_set: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    # The SNS topics SES publishes this account's notifications to. Only these are accepted:
    # anyone can subscribe our endpoint to a topic of their own, which SNS signs too.
    sns_topic_arns: list[str] = Field(default_factory=list)
    # Origins (``scheme://host[:port]``) trusted for SigningCertURL and SubscribeURL besides
    # https://sns.<region>.amazonaws.com: only a simulator's or a test's.
    sns_trusted_origins: list[str] = Field(default_factory=list)

    @field_validator("from_email")
    @classmethod
    def _sender_is_ascii(cls, value: str) -> str:
        if not wire_address(value).isascii():
            raise ValueError("SES does not support SMTPUTF8: the local part must be ASCII")
        return value

    @field_validator("sns_topic_arns")
    @classmethod
    def _topic_arns(cls, values: list[str]) -> list[str]:
        bad = [arn for arn in values if re.fullmatch(_TOPIC_ARN, arn) is None]
        if bad:
            raise ValueError(f"not SNS topic ARNs: {bad}")
        return values

    @field_validator("sns_trusted_origins")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        return [_origin(value) for value in values]

    @property
    def endpoint(self) -> str:
        return (self.base_url or f"https://email.{self.region}.amazonaws.com").rstrip("/")


def _origin(value: str) -> str:
    """``scheme://host[:port]`` in lower case; anything more is refused."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise ValueError(f"{value!r} is not an origin (scheme://host[:port])")
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"{value!r} is not an origin (scheme://host[:port])")
    return f"{parts.scheme}://{parts.netloc.lower()}"
