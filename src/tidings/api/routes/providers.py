"""Provider accounts: how each channel fails over, each account's circuit breaker and its
mass deactivation guard (docs/providers.md), and the guard's reset."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.clock import utcnow
from tidings.intake.requests import ApiModel
from tidings.priorities import Channel
from tidings.providers.accounts import AccountSettings
from tidings.providers.chains import builtin_account
from tidings.service import Service
from tidings.services import providers
from tidings.services.providers import GuardRecord, ProviderReport

router = APIRouter(prefix="/v1", tags=["providers"], dependencies=needs(Scope.ADMIN))


class BreakerOut(ApiModel):
    dispatcher: str
    updated_at: datetime
    state: dict[str, Any]


class DeactivationGuardOut(ApiModel):
    """The fleet's mass deactivation guard of one account: ``clear``, ``tripped`` (its push
    held) or ``probing`` (the hold is over, a few sends are being tried); the last trip
    (when, the share of the window's sends that would have deactivated, how many sends,
    why) and the last clear (when, by ``probes``, ``operator``)."""

    state: str
    tripped_at: datetime | None = None
    hold_until: datetime | None = None
    share: float | None = None
    samples: int | None = None
    reason: str | None = None
    cleared_at: datetime | None = None
    cleared_by: str | None = None


class AccountOut(ApiModel):
    name: str
    kind: str | None
    channels: list[str]
    rate_per_second: float | None
    max_in_flight: int | None
    breakers: list[BreakerOut]
    deactivation_guard: DeactivationGuardOut


class GuardResetOut(ApiModel):
    account: str
    released: int  # held deliveries made due again
    deactivation_guard: DeactivationGuardOut


class DispatcherLanesOut(ApiModel):
    """One dispatcher's (or worker's) lanes as it last reported them: per lane its counts
    (reads, claims, tokensAsked, outcomes, sends, restarts), lastSuccessAt, idleSeconds and
    stalledSince (null while it moves; dispatch/lanes/progress.py)."""

    dispatcher: str
    updated_at: datetime
    lanes: list[dict[str, Any]]


class ProvidersOut(ApiModel):
    chains: dict[str, list[str]]
    accounts: list[AccountOut]
    lanes: list[DispatcherLanesOut] = Field(default_factory=list)


@router.get("/providers", response_model=ProvidersOut)
async def list_providers(request: Request) -> Any:
    """Each channel's failover chain, and per account its limits, the circuit breaker state
    every running dispatcher reported in the last 30 s (credentials are never shown), and
    the fleet's mass deactivation guard."""
    service: Service = request.app.state.service
    settings = service.settings
    chains = {channel.value: settings.chain(channel.value) for channel in Channel}
    now = utcnow()
    fleet = await providers.fleet(service.db, now)
    reports = fleet.reports
    configured = [n for chain in chains.values() for n in chain]
    # Also what dispatchers report that this process's configuration does not name.
    names = dict.fromkeys([*configured, *(r.account for r in reports)])
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
                        dispatcher=r.dispatcher,
                        updated_at=r.updated_at,
                        state={k: v for k, v in r.state.items() if k != "lanes"},
                    )
                    for r in reports
                    if r.account == name
                ],
                deactivation_guard=_guard_out(fleet.guards.get(name), name, now),
            )
        )
    return ProvidersOut(chains=chains, accounts=accounts, lanes=_lanes(reports))


def _lanes(reports: list[ProviderReport]) -> list[DispatcherLanesOut]:
    """Each dispatcher's lanes, from the newest of its reports (every account's carries
    them)."""
    newest: dict[str, ProviderReport] = {}
    for report in reports:
        known = newest.get(report.dispatcher)
        if "lanes" in report.state and (known is None or report.updated_at > known.updated_at):
            newest[report.dispatcher] = report
    return [
        DispatcherLanesOut(dispatcher=name, updated_at=r.updated_at, lanes=r.state["lanes"])
        for name, r in sorted(newest.items())
    ]


@router.post(
    "/providers/{account}/deactivation-guard/reset",
    response_model=GuardResetOut,
    responses={404: {"model": ErrorResponse}},
)
async def reset_deactivation_guard(request: Request, account: str) -> Any:
    """Clear an account's mass deactivation guard now, once its configuration is fixed:
    every dispatcher follows within a second, and the deliveries it held are due again
    two seconds later (a guard that was clear stays clear)."""
    now = utcnow()
    reset = await providers.reset_guard(service_of(request), account, now)
    if reset is None:
        return error_response(404, "not_found", f"no provider account {account!r}", "account")
    released, record = reset
    shown = _guard_out(record, account, now)
    return GuardResetOut(account=account, released=released, deactivation_guard=shown)


def _guard_out(record: GuardRecord | None, account: str, now: datetime) -> DeactivationGuardOut:
    record = record or GuardRecord(account)
    return DeactivationGuardOut(
        state=record.state(now),
        tripped_at=record.tripped_at,
        hold_until=record.hold_until,
        share=record.share,
        samples=record.samples,
        reason=record.reason,
        cleared_at=record.cleared_at,
        cleared_by=record.cleared_by,
    )


def _account(accounts: dict[str, Any], name: str) -> AccountSettings | None:
    found: AccountSettings | None = accounts.get(name)
    if found is not None:
        return found
    try:
        return builtin_account(name)
    except ValueError:
        return None
