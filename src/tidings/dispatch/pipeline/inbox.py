"""The ``inbox`` channel's send (docs/inbox.md): no provider is called; the message is stored
in its user's feed, and the delivery is SENT once it is.

It goes through the send pipeline like any channel (preferences, suppressions, caps, the
account's bulkhead, the outcome writer), as the built-in account ``inbox`` that every
dispatcher has. Storing is idempotent by delivery id, so a send repeated after a lost
outcome shows the message once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tidings.clock import utcnow
from tidings.priorities import Channel
from tidings.providers.accounts import AccountSettings
from tidings.providers.base import Message, PoisonError, SendResult
from tidings.providers.chains import ProviderSet
from tidings.store import inbox
from tidings.store.engine import Database

ACCOUNT = "inbox"
# Told of each user whose message was stored, after the commit: the live streams of this
# process (docs/inbox.md; other processes hear of it through the database).
Stored = Callable[[str], None]


class InboxProvider:
    name = ACCOUNT

    def __init__(self, db: Database, on_stored: Stored | None = None) -> None:
        self.db = db
        self.on_stored = on_stored

    async def send(self, message: Message) -> SendResult:
        if not message.address:
            raise PoisonError("an inbox message needs a user id")
        content = message.content
        stored = await inbox.store(
            self.db,
            inbox.NewMessage(
                delivery_id=message.delivery_id,
                notification_id=message.notification_id,
                user_id=message.address,
                type=message.type,
                category=message.category,
                subject=content.subject,
                text=content.text,
                data=content.data,
            ),
            utcnow(),
        )
        if stored is not None and self.on_stored is not None:
            self.on_stored(stored.user_id)
        return SendResult(ACCOUNT, str(message.delivery_id))

    async def close(self) -> None:
        return None


def with_inbox(providers: ProviderSet, provider: InboxProvider) -> ProviderSet:
    """``providers`` with the inbox channel sent by ``provider`` alone (it has no other)."""
    return replace(
        providers,
        providers={**providers.providers, ACCOUNT: provider},
        chains={**providers.chains, Channel.INBOX.value: [ACCOUNT]},
        accounts={**providers.accounts, ACCOUNT: AccountSettings(kind=ACCOUNT)},
    )
