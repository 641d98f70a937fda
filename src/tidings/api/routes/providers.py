"""Provider accounts: how each channel fails over, and each account's circuit breaker."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request

from tidings.clock import utcnow
from tidings.intake.requests import ApiModel
from tidings.priorities import Channel
from tidings.providers.accounts import AccountSettings
from tidings.providers.chains import builtin_account
from tidings.service import Service
from tidings.store import provider_state

router = APIRouter(prefix="/v1", tags=["providers"])

# Reports older than this are from a dispatcher that is gone.
FRESH = timedelta(seconds=30)


class BreakerOut(ApiModel):
    dispatcher: str
    updated_at: datetime
    state: dict[str, Any]


class AccountOut(ApiModel):
    name: str
    kind: str | None
    channels: list[str]
    rate_per_second: float | None
    max_in_flight: int | None
    breakers: list[BreakerOut]


class ProvidersOut(ApiModel):
    chains: dict[str, list[str]]
    accounts: list[AccountOut]


@router.get("/providers", response_model=ProvidersOut)
async def list_providers(request: Request) -> Any:
    """Each channel's failover chain, and per account its limits and the circuit breaker
    state every running dispatcher reported in the last 30 s (credentials are never shown)."""
    service: Service = request.app.state.service
    settings = service.settings
    chains = {channel.value: settings.chain(channel.value) for channel in Channel}
    reports = await provider_state.recent(service.db, utcnow() - FRESH)
    configured = [n for chain in chains.values() for n in chain]
    # Also what dispatchers report that this process's configuration does not name.
    names = dict.fromkeys([*configured, *(r["account"] for r in reports)])
    accounts = []
    for name in names:
        account = _account(settings.accounts, name)
        accounts.append(
            AccountOut(
                name=name,
                kind=account.kind if account else None,
                channels=[c for c, chain in chains.items() if name in chain],
                rate_per_second=account.rate_per_second if account else None,
                max_in_flight=account.max_in_flight if account else None,
                breakers=[
                    BreakerOut(
                        dispatcher=r["dispatcher"], updated_at=r["updated_at"], state=r["state"]
                    )
                    for r in reports
                    if r["account"] == name
                ],
            )
        )
    return ProvidersOut(chains=chains, accounts=accounts)


def _account(accounts: dict[str, Any], name: str) -> AccountSettings | None:
    found: AccountSettings | None = accounts.get(name)
    if found is not None:
        return found
    try:
        return builtin_account(name)
    except ValueError:
        return None
