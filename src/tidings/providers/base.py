"""The provider interface: ``send(message) -> SendResult``, raising typed errors."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from tidings.priorities import Channel, Priority
from tidings.states import FailureKind


@dataclass(frozen=True, slots=True)
class Message:
    """What a provider needs to send one delivery."""

    delivery_id: uuid.UUID
    notification_id: uuid.UUID
    channel: Channel
    address: str
    type: str
    priority: Priority
    data: dict[str, Any] = field(default_factory=dict)
    locale: str | None = None
    user_id: str | None = None
    attempt: int = 1
    # Headers the message must carry (email: List-Unsubscribe for marketing), and the
    # unsubscribe link for a visible footer.
    headers: dict[str, str] = field(default_factory=dict)
    unsubscribe_url: str | None = None


@dataclass(frozen=True)
class SendResult:
    provider: str
    provider_msg_id: str | None = None


class ProviderError(Exception):
    """A failed send, with its failure kind and, when the provider said so, a Retry-After."""

    kind: FailureKind = FailureKind.TRANSIENT

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientError(ProviderError):
    kind = FailureKind.TRANSIENT


class PermanentError(ProviderError):
    kind = FailureKind.PERMANENT


class PoisonError(ProviderError):
    kind = FailureKind.POISON


class Provider(Protocol):
    """One adapter for one external API (or the development sink)."""

    name: str

    async def send(self, message: Message) -> SendResult: ...

    async def close(self) -> None: ...
