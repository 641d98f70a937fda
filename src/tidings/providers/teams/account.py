"""A Teams account: no credentials (each workflow's URL carries its signature), the
Adaptive Card version its cards declare, and where to post (the address's own host)."""

from __future__ import annotations

from typing import Literal

from tidings.providers.accounts import AccountSettings


class TeamsAccount(AccountSettings):
    kind: Literal["teams"] = "teams"
    # Teams renders Adaptive Cards up to 1.5; Workflows' "post card" actions take 1.4.
    card_version: Literal["1.2", "1.3", "1.4", "1.5"] = "1.4"
    # Replaces the origin of the addresses (the simulator, a proxy).
    base_url: str | None = None
    # A workflow trigger has no idempotency key: a post whose answer was lost is failed.
    on_ambiguous: Literal["retry", "fail"] = "fail"
