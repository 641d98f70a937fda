"""The data of ``python -m bench.campaign``: its notification types and templates, an audience
of users with profiles following one topic (made by ``generate_series``, in SQL), and the
reset between runs."""

from __future__ import annotations

from typing import Any

import asyncpg

from bench.database import register_type
from tidings.store.engine import connect

TOPIC = "bench:campaign"  # the expansion's audience
DRAIN_TOPIC = "bench:drain"  # the drain run's audience (its first users)
PROMO = "bench.promo"  # the campaign's type: marketing, LOW, email
OTP = "bench.otp"  # the HIGH notifications of the drain run: transactional, email
CAMPAIGN_DATA: dict[str, Any] = {"offer": "spring", "percent": 20}
TYPES: dict[str, dict[str, Any]] = {
    PROMO: {"category": "marketing", "priority": "low", "channels": ["email"]},
    OTP: {"category": "transactional", "priority": "high", "channels": ["email"]},
}
TEMPLATES: dict[str, dict[str, Any]] = {
    PROMO: {"subject": "{{ percent }}% off", "text": "The {{ offer }} offer: {{ percent }}% off."},
    OTP: {"subject": "Your code", "text": "Your code is {{ code }}."},
}


def user_id(number: int) -> str:
    """The id of user ``number`` (from 1): zero-padded, so text order is number order."""
    return f"u{number:08d}"


async def register(database_url: str) -> None:
    """The bench's notification types and their English templates."""
    db = connect(database_url)
    try:
        for name, body in TYPES.items():
            await register_type(db, name, body, TEMPLATES[name])
    finally:
        await db.dispose()


_PROFILES = """
INSERT INTO user_profile (id, email, created_at, updated_at)
SELECT 'u' || lpad(n::text, 8, '0'), 'u' || n || '@example.com', now(), now()
FROM generate_series(1, $1) AS n
"""
_FOLLOWERS = """
INSERT INTO topic_subscription (topic, user_id, created_at)
SELECT $2, 'u' || lpad(n::text, 8, '0'), now() FROM generate_series(1, $1) AS n
"""


async def audience(conn: asyncpg.Connection, profiles: int, topics: dict[str, int]) -> None:
    """``profiles`` users with an email address; the first ``n`` of them follow each topic
    of ``topics``. Then vacuumed (hint bits, visibility map, statistics) and checkpointed, so
    that neither side of a comparison pays for the other's first read of fresh rows."""
    await conn.execute(_PROFILES, profiles)
    for topic, followers in topics.items():
        await conn.execute(_FOLLOWERS, followers, topic)
    await conn.execute("VACUUM (ANALYZE) user_profile, topic_subscription")
    await conn.execute("CHECKPOINT")


async def reset(conn: asyncpg.Connection) -> None:
    """Empty what a run writes (the audience stays), then checkpoint: every run starts equal."""
    await conn.execute("TRUNCATE delivery_event, delivery, notification, idempotency_key, campaign")
    await conn.execute("CHECKPOINT")
