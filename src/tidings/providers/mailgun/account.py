"""A Mailgun account: its API key and sending domain, its default sender, and the key that
signs its webhooks."""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr

from tidings.providers.accounts import AccountSettings


class MailgunAccount(AccountSettings):
    kind: Literal["mailgun"] = "mailgun"
    api_key: SecretStr
    # The sending domain, as added in Mailgun (Sending -> Domains).
    domain: str
    from_email: str
    from_name: str | None = None
    # US; https://api.eu.mailgun.net for a domain created in the EU region.
    base_url: str = "https://api.mailgun.net"
    # The HTTP webhook signing key (Mailgun: Sending -> Webhooks). Unset: tidings refuses
    # this account's webhooks (never unsigned).
    webhook_signing_key: SecretStr | None = None
