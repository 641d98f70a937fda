"""The reputation guard: a running campaign pauses itself before its complaints or hard
bounces hurt the sender (Gmail and Yahoo refuse bulk senders whose spam-complaint rate
reaches 0.3%, and want it under 0.1%).

Every ``reputation_interval`` an expander (every dispatcher runs one) looks at each running
campaign but transactional ones: over its last ``reputation_window`` sends (since its last
pause; none judged before the window is full), if the share that complained exceeds
``max_complaint_rate`` or the share that bounced hard exceeds ``max_bounce_rate``, with
``reputation_confidence`` (below), the campaign is PAUSED with the reason, a
``campaign.paused`` event and a warning in the log; its unsent deliveries are held
(store/campaign_pause.py) until ``POST /v1/campaigns/{id}/resume``. Complaints and bounces
are what the providers' webhooks reported: a send is counted before its report arrives, so
the rates lag by the reports' delay. Single notifications are never paused: the guard
knows only campaigns.

**Exceeds, with confidence.** Complaints are rare events: at the 0.1% limit, 1,000 sends
bring one complaint on average, and two close together are common (a campaign at 0.05%
would show two in some window of 1,000 in about half of its 5,000-email runs). So a rate
exceeds its limit when the count over the window is one that a campaign exactly at the
limit would reach with probability under ``1 - reputation_confidence`` (Poisson tail; 95%
by default: 4 complaints in 1,000, where the bare rate would take 2). A campaign at 0.5%
pauses within its first 1,000 to 1,500 sends in about nine runs of ten; one at 0.05% is
paused in about two of a hundred (tests/integration/test_campaign_reputation.py, and the
arithmetic in docs). ``reputation_confidence = 0`` judges the bare rate.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from dataclasses import dataclass
from datetime import datetime

from tidings.campaigns.settings import CampaignSettings
from tidings.store import campaign_pause
from tidings.store.campaign_pause import Window
from tidings.store.campaigns import Campaign
from tidings.store.engine import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    campaign_id: uuid.UUID
    reason: str


def verdict(found: Campaign, window: Window, settings: CampaignSettings) -> Verdict | None:
    """Why the campaign must pause, judged on its last sends; None when it may go on."""
    if window.sends < settings.reputation_window:
        return None
    sure = settings.reputation_confidence
    if exceeds(window.complaints, window.sends, settings.max_complaint_rate, sure):
        complaints = window.complaints / window.sends
        return Verdict(
            found.id,
            f"complaint rate {complaints:.2%} ({window.complaints} of the last {window.sends}"
            f" sends) exceeds campaigns.max_complaint_rate {settings.max_complaint_rate:.2%}",
        )
    if exceeds(window.hard_bounces, window.sends, settings.max_bounce_rate, sure):
        bounces = window.hard_bounces / window.sends
        return Verdict(
            found.id,
            f"hard-bounce rate {bounces:.2%} ({window.hard_bounces} of the last {window.sends}"
            f" sends) exceeds campaigns.max_bounce_rate {settings.max_bounce_rate:.2%}",
        )
    return None


def exceeds(count: int, sends: int, limit: float, confidence: float) -> bool:
    """``count`` of ``sends`` is over ``limit``: barely (confidence 0), or so far over that
    a campaign at the limit gets that many with probability under ``1 - confidence``."""
    if count <= limit * sends:
        return False
    if confidence == 0:
        return True
    return poisson_tail(count, limit * sends) < 1 - confidence


def poisson_tail(count: int, mean: float) -> float:
    """P(X >= count) for X Poisson with ``mean`` (terms in log space: no overflow)."""
    if mean <= 0:
        return 0.0 if count > 0 else 1.0
    if mean > 1000:  # a normal approximation, with continuity correction
        z = (count - 0.5 - mean) / math.sqrt(mean)
        return 0.5 * math.erfc(z / math.sqrt(2))
    below = sum(math.exp(i * math.log(mean) - mean - math.lgamma(i + 1)) for i in range(count))
    return max(0.0, 1.0 - below)


class ReputationGuard:
    def __init__(self, db: Database, settings: CampaignSettings) -> None:
        self.db = db
        self.settings = settings
        self._next = 0.0  # time.monotonic() of the next look

    async def maybe_check(self, now: datetime) -> list[Verdict]:
        """``check`` when ``reputation_interval`` has passed since the last one."""
        if time.monotonic() < self._next:
            return []
        self._next = time.monotonic() + self.settings.reputation_interval
        return await self.check(now)

    async def check(self, now: datetime) -> list[Verdict]:
        """Pause each running campaign over a limit; hold what paused ones got back."""
        paused = []
        for found in await campaign_pause.watched(self.db):
            window = await campaign_pause.last_sends(
                self.db, found, self.settings.reputation_window
            )
            judged = verdict(found, window, self.settings)
            if judged is not None and await campaign_pause.pause(
                self.db, found.id, judged.reason, now
            ):
                log.warning("campaign %s paused: %s", found.id, judged.reason)
                paused.append(judged)
        await campaign_pause.hold_paused(self.db)
        return paused
