"""One page of a campaign's audience turned into notification drafts: one notification per
user, one delivery per channel and address, with the accept-time policy of single sends
(docs/architecture.md, Campaigns and Policy check order)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from tidings.campaigns.planning import planned_at
from tidings.ids import delivery_ids, new_id
from tidings.policy.accept_time import skip_unwanted
from tidings.priorities import Channel, Priority
from tidings.states import Status
from tidings.store import users
from tidings.store.campaigns import Campaign
from tidings.store.engine import Database
from tidings.store.intake import DeliveryDraft, NotificationDraft
from tidings.store.users import UserProfile

KEY_LIMIT = 255  # notification.idempotency_key


def idempotency_key(campaign: Campaign, user_id: str) -> str:
    """``campaign:<id>:<user>``; a user id too long for the column is hashed."""
    key = f"campaign:{campaign.id}:{user_id}"
    if len(key) <= KEY_LIMIT:
        return key
    return f"campaign:{campaign.id}:#{hashlib.sha256(user_id.encode()).hexdigest()}"


@dataclass(frozen=True)
class Recipients:
    """What the drafts of one page need to know of its users."""

    profiles: Mapping[str, UserProfile]
    tokens: Mapping[str, list[str]]

    @classmethod
    async def read(cls, db: Database, campaign: Campaign, user_ids: Sequence[str]) -> Recipients:
        profiles = await users.get_users(db, user_ids)
        tokens = {}
        if Channel.PUSH.value in campaign.channels:
            tokens = await users.active_device_tokens(db, user_ids)
        return cls(profiles, tokens)

    def addresses(self, user_id: str, channel: str) -> list[str]:
        if channel == Channel.PUSH.value:
            return self.tokens.get(user_id, [])
        profile = self.profiles.get(user_id)
        value = profile.address(channel) if profile is not None else None
        return [value] if value else []


@dataclass
class Planner:
    """Builds the drafts of a campaign's pages, each user at its planned time."""

    campaign: Campaign
    window: float  # seconds: planning.spread_seconds
    rng: random.Random

    def __post_init__(self) -> None:
        self._data_json = json.dumps(
            self.campaign.data, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )

    def drafts(
        self, user_ids: Sequence[str], first_ordinal: int, recipients: Recipients
    ) -> list[NotificationDraft]:
        return [
            self._draft(user_id, first_ordinal + index, recipients)
            for index, user_id in enumerate(user_ids)
        ]

    def _draft(self, user_id: str, ordinal: int, recipients: Recipients) -> NotificationDraft:
        c = self.campaign
        profile = recipients.profiles.get(user_id)
        zone = profile.timezone if profile else None
        notification_id = new_id()
        ids = delivery_ids(notification_id)  # in its millisecond: its day's partition
        deliveries: list[DeliveryDraft] = []
        for channel in c.channels:
            found = recipients.addresses(user_id, channel)
            if not found:
                deliveries.append(
                    DeliveryDraft(next(ids), channel, "", Status.SKIPPED, "no_address")
                )
            deliveries.extend(DeliveryDraft(next(ids), channel, address) for address in found)
        return NotificationDraft(
            id=notification_id,
            namespace=c.namespace,
            idempotency_key=idempotency_key(c, user_id),
            request_hash=c.request_hash,
            type=c.type,
            category=c.category,
            priority=Priority(c.priority),
            user_id=user_id,
            data=c.data,
            data_json=self._data_json,
            locale=profile.locale if profile else None,
            send_at=planned_at(c, ordinal, zone, self.window, self.rng),
            deliveries=deliveries,
            campaign_id=c.id,
        )


async def page_drafts(
    db: Database,
    planner: Planner,
    user_ids: Sequence[str],
    first_ordinal: int,
    required: Callable[[str], Collection[str]],
) -> tuple[list[NotificationDraft], Recipients]:
    """The page's drafts with accept-time policy applied (SKIPPED rows carry the reason)."""
    recipients = await Recipients.read(db, planner.campaign, user_ids)
    drafts = planner.drafts(user_ids, first_ordinal, recipients)
    await skip_unwanted(db, drafts, required)
    return drafts, recipients
