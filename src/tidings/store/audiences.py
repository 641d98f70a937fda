"""Who a campaign reaches: a topic's followers, a list of user ids, or a segment of user
profiles, read page by page in a stable order (docs/architecture.md, Campaigns).

An audience is stored as the JSON the API took, normalised: ``{"topic": ...}``,
``{"userIds": [...]}`` or ``{"segment": <condition>}``. A condition is one of
``{"field": F, "equals": V}``, ``{"field": F, "in": [V, ...]}``, ``{"field": F, "exists":
true|false}``, ``{"and": [<condition>, ...]}`` and ``{"or": [<condition>, ...]}``; the API
checks its shape and bounds (api/schemas.py). ``F`` is a profile field (``email``,
``phone``, ``timezone``, ``locale``) or, for any other name or ``attributes.<name>``, a key
of the profile's attributes; values are compared as text.

Pages are ordered by user id and resumed after the last id of the page before (the
campaign's cursor), so a page read twice after a crash holds the same users.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import topic_subscription, user_profile

Audience = Mapping[str, Any]
PROFILE_FIELDS = ("email", "phone", "timezone", "locale")


def condition(segment: Mapping[str, Any]) -> sa.ColumnElement[bool]:
    """The SQL of a segment condition over ``user_profile``."""
    if "and" in segment:
        return sa.and_(*(condition(part) for part in segment["and"]))
    if "or" in segment:
        return sa.or_(*(condition(part) for part in segment["or"]))
    value = _field(segment["field"])
    if "equals" in segment:
        equals: sa.ColumnElement[bool] = value == segment["equals"]
        return equals
    if "in" in segment:
        return value.in_(list(segment["in"]))
    return value.is_not(None) if segment["exists"] else value.is_(None)


def _field(name: str) -> sa.ColumnElement[Any]:
    if name in PROFILE_FIELDS:
        return user_profile.c[name]
    key = name.removeprefix("attributes.")
    attribute: sa.ColumnElement[Any] = user_profile.c.attributes[key].as_string()
    return attribute


def sorted_ids(audience: Audience) -> list[str]:
    """An inline audience's ids, each once, in code point order (its paging order)."""
    return sorted(set(audience["userIds"]))


async def size(db: Database, audience: Audience) -> int:
    """How many users the audience holds now."""
    if "userIds" in audience:
        return len(sorted_ids(audience))
    column, where = _members(audience)
    query = sa.select(sa.func.count(column)).where(where)
    async with db.engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def page(db: Database, audience: Audience, after: str | None, limit: int) -> list[str]:
    """Up to ``limit`` user ids of the audience after ``after``, in order."""
    if "userIds" in audience:
        ids = sorted_ids(audience)
        start = 0 if after is None else bisect.bisect_right(ids, after)
        return ids[start : start + limit]
    column, where = _members(audience)
    if after is not None:
        where = sa.and_(where, column > after)
    query = sa.select(column).where(where).order_by(column).limit(limit)
    async with db.engine.connect() as conn:
        return list(await conn.scalars(query))


def _members(audience: Audience) -> tuple[sa.ColumnElement[str], sa.ColumnElement[bool]]:
    """The user id column and the condition that select the audience's rows (a topic's
    rows are read through its key, a segment's through the profiles' key)."""
    if "topic" in audience:
        return topic_subscription.c.user_id, topic_subscription.c.topic == audience["topic"]
    return user_profile.c.id, condition(audience["segment"])


def describe(audience: Audience) -> str:
    """One line for logs and the CLI (no user ids)."""
    if "topic" in audience:
        return f"topic {audience['topic']}"
    if "userIds" in audience:
        return f"{len(audience['userIds'])} listed users"
    return "a segment of user profiles"
