"""The provider accounts as the fleet sees them: each dispatcher's recent reports (breakers,
lanes) and each account's mass deactivation guard, and the guard's reset."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from tidings.clock import utcnow
from tidings.dispatch.protection.guard_sync import GUARD_SYNC_SECONDS
from tidings.service import Service
from tidings.store import deactivation_guard as guards
from tidings.store import provider_state
from tidings.store.deactivation_guard import GuardRecord
from tidings.store.engine import Database
from tidings.store.provider_state import ProviderReport

__all__ = ["FRESH", "Fleet", "GuardRecord", "ProviderReport", "fleet", "reset_guard"]

log = logging.getLogger(__name__)

# Reports older than this are from a dispatcher that is gone.
FRESH = timedelta(seconds=30)
# Held deliveries are due this long after a reset: by then every dispatcher has read it.
RESET_DUE = timedelta(seconds=2 * GUARD_SYNC_SECONDS)


@dataclass(frozen=True)
class Fleet:
    reports: list[ProviderReport]  # of the last FRESH seconds, by account and dispatcher
    guards: dict[str, GuardRecord]  # by account; an account never tripped has none


async def fleet(db: Database, now: datetime) -> Fleet:
    reports = await provider_state.reports(db, now - FRESH)
    return Fleet(reports, {record.account: record for record in await guards.records(db)})


async def reset_guard(
    service: Service, account: str, now: datetime
) -> tuple[int, GuardRecord | None] | None:
    """Clear the account's guard; how many held deliveries are due again, and its record.
    None when no configuration, dispatcher or guard knows the account."""
    if not await _known(service, account):
        return None
    released = await guards.reset(service.db, account, now, now + RESET_DUE)
    log.warning(
        "deactivation guard of %s reset by an operator: %d held deliveries due again",
        account,
        released,
    )
    return released, (await fleet(service.db, now)).guards.get(account)


async def _known(service: Service, account: str) -> bool:
    """Configured, reported by a dispatcher, or known to the guard's table."""
    settings = service.settings
    if account in settings.accounts or any(account in c for c in settings.chains().values()):
        return True
    reports = await provider_state.reports(service.db, utcnow() - FRESH)
    if any(r.account == account for r in reports):
        return True
    return any(r.account == account for r in await guards.records(service.db))
