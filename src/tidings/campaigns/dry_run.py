"""The dry run: what a campaign would do on today's data, with nothing written
(docs/architecture.md, Campaigns).

It pages the audience and builds every page's drafts exactly as the expansion does (the same
planner, the same accept-time policy), then judges each delivery as the send-time checks
would at its planned time: quiet hours defer it to the window's end, and the frequency cap
skips what is over the user's allowance for that local day.
"""

from __future__ import annotations

import array
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from tidings.campaigns.expansion import Planner, Recipients, page_drafts
from tidings.campaigns.planning import spread_seconds
from tidings.campaigns.settings import CampaignSettings
from tidings.policy import quiet_hours
from tidings.priorities import Category
from tidings.states import Status
from tidings.store import audiences, frequency
from tidings.store.campaigns import Campaign
from tidings.store.engine import Database
from tidings.store.intake import NotificationDraft
from tidings.store.types import NotificationType

# Bucket widths of the histogram, the smallest that gives at most MAX_BUCKETS buckets.
BUCKET_WIDTHS = (1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
MAX_BUCKETS = 60


@dataclass
class ChannelPlan:
    deliveries: int = 0
    would_send: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    deferred_by_quiet_hours: int = 0


@dataclass
class DryRun:
    audience_size: int
    channels: dict[str, ChannelPlan]
    planned: array.array[float]  # POSIX times of the sends, after every deferral

    def histogram(self) -> tuple[int, list[tuple[datetime, int]]]:
        """(bucket width in seconds, [(bucket start, sends)]), empty buckets included."""
        if not self.planned:
            return BUCKET_WIDTHS[0], []
        low, high = min(self.planned), max(self.planned)
        width = next(
            (w for w in BUCKET_WIDTHS if (high - low) / w < MAX_BUCKETS), BUCKET_WIDTHS[-1]
        )
        first = int(low // width) * width
        counts = Counter(int((t - first) // width) for t in self.planned)
        return width, [
            (datetime.fromtimestamp(first + i * width, UTC), counts.get(i, 0))
            for i in range(max(counts) + 1)
        ]


@dataclass(frozen=True)
class SendTimeRules:
    """The send-time policy the forecast applies (the dispatcher's settings)."""

    caps: Mapping[str, int]
    quiet_jitter: float


async def dry_run(
    db: Database,
    campaign: Campaign,
    kind: NotificationType,
    settings: CampaignSettings,
    rules: SendTimeRules,
    rng: random.Random | None = None,
) -> DryRun:
    """Forecast ``campaign`` (a row not stored; its audience size is counted here)."""
    rng = rng or random.Random()
    size = await audiences.size(db, campaign.audience)
    campaign = replace(campaign, audience_size=size)
    planner = Planner(campaign, spread_seconds(campaign, settings.due_spread_seconds), rng)
    result = DryRun(size, {c: ChannelPlan() for c in campaign.channels}, array.array("d"))
    cursor, ordinal = None, 0
    while True:
        ids = await audiences.page(db, campaign.audience, cursor, settings.page_size)
        if not ids:
            return result
        drafts, recipients = await page_drafts(db, planner, ids, ordinal, lambda _: kind.required)
        await _judge(db, drafts, recipients, rules, rng, result)
        if len(ids) < settings.page_size:
            return result
        cursor, ordinal = ids[-1], ordinal + len(ids)


async def _judge(
    db: Database,
    drafts: list[NotificationDraft],
    recipients: Recipients,
    rules: SendTimeRules,
    rng: random.Random,
    result: DryRun,
) -> None:
    """Count each delivery of the page as the send-time checks would treat it."""
    timed = [
        (draft, d, _after_quiet(draft, d.channel, recipients, rules, rng))
        for draft in drafts
        for d in draft.deliveries
    ]
    days = {
        (draft.user_id or "", draft.category, _local_day(when, recipients, draft.user_id))
        for draft, d, (when, _) in timed
        if d.status is Status.PENDING and _capped(draft.category, rules)
    }
    used = await frequency.sent_counts(db, days) if days else {}
    allowance: dict[frequency.Day, int] = {}
    for draft, d, (when, deferred) in timed:
        plan = result.channels[d.channel]
        plan.deliveries += 1
        if d.status is not Status.PENDING:
            plan.skipped[d.skip_reason or "unknown"] += 1
            continue
        if _capped(draft.category, rules):
            key = (draft.user_id or "", draft.category, _local_day(when, recipients, draft.user_id))
            left = allowance.setdefault(key, rules.caps[draft.category] - used.get(key, 0))
            if left <= 0:
                plan.skipped["frequency_cap"] += 1
                continue
            allowance[key] = left - 1
        plan.would_send += 1
        plan.deferred_by_quiet_hours += deferred
        result.planned.append(when.timestamp())


def _capped(category: str, rules: SendTimeRules) -> bool:
    return category in rules.caps and category != Category.TRANSACTIONAL.value


def _after_quiet(
    draft: NotificationDraft,
    channel: str,
    recipients: Recipients,
    rules: SendTimeRules,
    rng: random.Random,
) -> tuple[datetime, bool]:
    """The planned time, moved past the user's quiet hours where they apply."""
    planned = draft.send_at or datetime.now(UTC)
    profile = recipients.profiles.get(draft.user_id or "")
    if not quiet_hours.applies(draft.category, channel) or profile is None:
        return planned, False
    window = profile.quiet_hours
    if not window or not profile.timezone:
        return planned, False
    end = quiet_hours.quiet_until(planned, profile.timezone, window["from"], window["to"])
    if end is None:
        return planned, False
    return end + timedelta(seconds=rng.uniform(0, rules.quiet_jitter)), True


def _local_day(when: datetime, recipients: Recipients, user_id: str | None) -> date:
    profile = recipients.profiles.get(user_id or "")
    zone = profile.timezone if profile else None
    return when.astimezone(ZoneInfo(zone)).date() if zone else when.date()


def estimated_seconds(
    plan: ChannelPlan, rate: float | None, share: float, window_seconds: float
) -> float:
    """How long the channel's sends take: the window, or the account's pace at the
    priority's share if that is slower (an account without a rate of ours: the window)."""
    if not plan.would_send:
        return 0.0
    paced = plan.would_send / (rate * share) if rate else 0.0
    return round(max(window_seconds, paced), 1)
