"""The in-app feed (docs/inbox.md): a user's messages and counts, their state changes, and
the user tokens browsers read it with."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tidings.clock import utcnow
from tidings.policy.inbox_tokens import InvalidToken, Issued, is_user_token
from tidings.service import Service
from tidings.store import inbox, users
from tidings.store.inbox import Change, Counts, InboxMessage, Status
from tidings.store.inbox_wakeup import StreamsFull

__all__ = [
    "Change",
    "Counts",
    "Feed",
    "InboxMessage",
    "InvalidToken",
    "Issued",
    "Status",
    "StreamsFull",
    "is_user_token",
]

# The changes of one message, and of every message (read-all, seen-all).
CHANGES: tuple[Change, ...] = ("seen", "read", "unread", "archive", "unarchive")
ALL_CHANGES: dict[str, Change] = {"read-all": "read", "seen-all": "seen"}


@dataclass(frozen=True)
class Feed:
    items: list[InboxMessage]
    next: uuid.UUID | None
    counts: Counts


async def is_user(service: Service, user_id: str) -> bool:
    """Whether the user is registered: only they have a feed (an erased one has none)."""
    return await users.get_user(service.db, user_id) is not None


async def feed(
    service: Service, user_id: str, status: Status, limit: int, after: uuid.UUID | None
) -> Feed:
    page = await inbox.page(service.db, user_id, status, limit, after)
    return Feed(page.items, page.next, await inbox.counts(service.db, user_id))


async def change_one(
    service: Service, user_id: str, message_id: uuid.UUID, what: Change
) -> tuple[InboxMessage, Counts] | None:
    """The message after the change (unchanged when it was in that state already) and the
    counts; None when the user has no such message."""
    if await inbox.change(service.db, user_id, [message_id], what, utcnow()):
        service.inbox_wakeup.wake(user_id)
    found = await inbox.get(service.db, user_id, message_id)
    if found is None:
        return None
    return found, await inbox.counts(service.db, user_id)


async def change_all(service: Service, user_id: str, what: Change) -> tuple[int, Counts]:
    """Every message of the user not in that state yet: how many changed, and the counts."""
    changed = await inbox.change(service.db, user_id, None, what, utcnow())
    if changed:
        service.inbox_wakeup.wake(user_id)
    return len(changed), await inbox.counts(service.db, user_id)


async def counts_of(service: Service, user_id: str) -> Counts:
    return await inbox.counts(service.db, user_id)


async def newer(service: Service, user_id: str, than: uuid.UUID, limit: int) -> list[InboxMessage]:
    return await inbox.newer(service.db, user_id, than, limit)


async def newest_id(service: Service, user_id: str) -> uuid.UUID:
    return await inbox.newest_id(service.db, user_id)


def mint_token(service: Service, user_id: str) -> Issued:
    return service.inbox_tokens.mint(user_id, utcnow())


def token_user(service: Service, token: str) -> str:
    """The user a genuine, unexpired user token names; else ``InvalidToken``."""
    return service.inbox_tokens.user_of(token)
