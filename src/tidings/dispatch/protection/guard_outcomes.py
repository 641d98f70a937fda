"""What the mass deactivation guard (dispatch/protection/deactivation_guard.py) makes of a send's
outcome that would deactivate a token for a configuration-shaped reason: the deactivation
made (a whole window passed, the guard clear, since the delivery first waited), the
delivery held (the guard tripped), or the delivery given back for a window while the
deactivation waits for the guard's verdict. Held and waiting deliveries use no attempt."""

from __future__ import annotations

import logging
import random
from datetime import datetime, timedelta
from typing import Any

from tidings.clock import utcnow
from tidings.dispatch.protection.deactivation_guard import (
    HELD,
    DeactivationGuard,
    configuration_shaped,
)
from tidings.store.claims import ClaimedDelivery
from tidings.store.deactivation_guard import HELD_EVENT, PENDING_EVENT, held_note, pending_since
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome

log = logging.getLogger(__name__)

CONFIRM_MARGIN = 1.0  # a waiting delivery comes back this long after its window


async def judged(
    guard: DeactivationGuard,
    db: Database,
    claimed: ClaimedDelivery,
    account: str,
    outcome: Outcome,
    rng: random.Random,
) -> Outcome:
    """``outcome``, once the guard has judged the deactivation it would make: made (a whole
    window passed since it first waited), held (the guard tripped), or waiting."""
    if not guard.enabled or not configuration_shaped(outcome.effect, outcome.effect_reason):
        return outcome
    wait = await _unconfirmed_for(guard, db, claimed, account)
    hold = guard.holding(account)  # also when it tripped during the read
    if hold is None and wait <= 0:
        return outcome
    now = utcnow()
    if hold is not None:
        return held(claimed, now + timedelta(seconds=hold * rng.uniform(1, 1.2)), account, outcome)
    until = now + timedelta(seconds=wait * rng.uniform(1, 1.2) + CONFIRM_MARGIN)
    return pending(claimed, until, outcome)


async def _unconfirmed_for(
    guard: DeactivationGuard, db: Database, claimed: ClaimedDelivery, account: str
) -> float:
    """Seconds the deactivation must still wait for its verdict (0: it may be made)."""
    if guard.holding(account) is not None:
        return guard.confirm_in(None)  # held anyway: no need to read
    try:
        since = await pending_since(db, claimed.id, guard.confirm_since(account))
    except Exception as error:  # unknown is not confirmed: wait another window
        log.warning("reading a pending deactivation failed (%s)", type(error).__name__)
        since = None
    return guard.confirm_in(since)


def held(
    claimed: ClaimedDelivery, until: datetime, account: str, failure: Outcome | None = None
) -> Outcome:
    """Held by a tripped guard: PENDING until ``until``, the attempt given back, no token
    deactivated; a reset finds it by its ``last_error``."""
    outcome = Outcome.deferred(claimed, until, HELD)
    outcome.last_error = held_note(account)
    if failure is not None:
        outcome.event, outcome.event_detail = HELD_EVENT, _detail(failure)
    return outcome


def pending(claimed: ClaimedDelivery, until: datetime, failure: Outcome) -> Outcome:
    """A configuration-shaped failure while the guard is clear: back to PENDING for a
    window (the attempt given back), its deactivation waiting for the guard's verdict."""
    outcome = Outcome.deferred(claimed, until, PENDING_EVENT)
    outcome.event = PENDING_EVENT
    outcome.event_detail = _detail(failure) | {"confirmAfter": until.isoformat()}
    outcome.last_error, outcome.provider = failure.last_error, failure.provider
    return outcome


def _detail(failure: Outcome) -> dict[str, Any]:
    return {
        "reason": failure.effect_reason,
        "error": failure.last_error,
        "provider": failure.provider,
    }
