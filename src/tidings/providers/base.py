"""The provider interface: ``send(message) -> SendResult``, raising typed errors."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from tidings.priorities import Channel, Priority
from tidings.states import Effect, FailureKind


# Content and Message are built once per send: plain slotted dataclasses, as a frozen one
# costs several microseconds more to build. Adapters treat them as read-only.
@dataclass(slots=True)
class Content:
    """The rendered words of one delivery (from its template).

    Email: ``subject``, ``text`` and optionally ``html``. SMS: ``text``. Push: ``subject``
    is the title, ``text`` the body, ``data`` the custom key/values (strings, as FCM wants).
    Webhook: ``data`` is the JSON body.
    """

    subject: str | None = None
    text: str = ""
    html: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EmailSender:
    """The From of an email: a type may set its own instead of the account's."""

    address: str
    name: str | None = None


@dataclass(slots=True)
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
    content: Content = field(default_factory=Content)
    category: str = "transactional"
    # The type's ttl (APNs apns-expiration, FCM android.ttl) and collapse key.
    ttl_seconds: int | None = None
    collapse_key: str | None = None
    # Email: the sender (None: the account's), where replies go, and copies (Bcc never
    # appears in the headers).
    sender: EmailSender | None = None
    reply_to: str | None = None
    cc: tuple[str, ...] = ()
    bcc: tuple[str, ...] = ()
    # WhatsApp: when the number last wrote to each account (the 24-hour customer service
    # window, providers/_whatsapp_window.py); empty when it never did.
    inbound_at: dict[str, datetime] = field(default_factory=dict)

    @property
    def idempotency_key(self) -> str:
        """The delivery id: what a provider with idempotency keys dedupes on."""
        return str(self.delivery_id)


@dataclass(frozen=True)
class SendResult:
    provider: str
    provider_msg_id: str | None = None


class ProviderError(Exception):
    """A failed send, with its failure kind and, when the provider said so, a Retry-After.

    ``effect`` and ``reason`` (a short code such as ``hard_bounce`` or ``Unregistered``)
    tell the dispatcher to deactivate the device or suppress the address. ``ambiguous``: the
    request may have reached the provider and no answer says whether it was sent (a read
    timeout, a connection lost after the request was written).
    """

    kind: FailureKind = FailureKind.TRANSIENT

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        effect: Effect | None = None,
        reason: str | None = None,
        ambiguous: bool = False,
        effect_at: datetime | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.effect = effect
        self.reason = reason
        self.ambiguous = ambiguous
        # When the provider last confirmed the address dead (APNs' 410 timestamp): a device
        # registered again after it keeps its token.
        self.effect_at = effect_at


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
