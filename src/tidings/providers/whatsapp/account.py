"""A WhatsApp Business number on Meta's Cloud API: its phone number id, the access token
(a system user's), and the app secret Meta signs its webhooks with."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from tidings.providers.accounts import AccountSettings


class WhatsAppAccount(AccountSettings):
    kind: Literal["whatsapp"] = "whatsapp"
    phone_number_id: str = Field(pattern=r"^[0-9]{5,30}$")
    access_token: SecretStr
    # Verifies the status webhooks (X-Hub-Signature-256); None: they are refused.
    app_secret: SecretStr | None = None
    # Meta's webhook verification: the token typed into the app's webhook settings, which
    # Meta's GET (hub.verify_token) must carry; None: the handshake is refused.
    verify_token: SecretStr | None = None
    base_url: str = "https://graph.facebook.com"
    api_version: str = Field(default="v21.0", pattern=r"^v[0-9]{1,3}\.[0-9]$")
    # The Cloud API has no idempotency key: a send whose answer was lost is failed.
    on_ambiguous: Literal["retry", "fail"] = "fail"
