"""The delivery state machine (docs/architecture.md, Delivery state machine): statuses and the
transitions between them, and the vocabulary of failures (kinds, effects) every layer shares."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    SENDING = "SENDING"
    SENT = "SENT"
    DELIVERED = "DELIVERED"
    BOUNCED = "BOUNCED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"
    EXPIRED = "EXPIRED"

    @property
    def is_terminal(self) -> bool:
        """No dispatcher will touch the delivery again (webhooks may still add events)."""
        return self not in _IN_PROGRESS


class FailureKind(StrEnum):
    TRANSIENT = "transient"  # retry with backoff
    PERMANENT = "permanent"  # invalid address, unregistered token: never retry
    POISON = "poison"  # the message itself cannot be sent (render error, too large)
    EXHAUSTED = "exhausted"  # transient too many times
    # No answer after the request may have reached a provider without idempotency, on an
    # account that prefers at most once (on_ambiguous = "fail"): perhaps sent, never retried.
    AMBIGUOUS = "ambiguous"


class Effect(StrEnum):
    """What a permanent provider error means for the address, beyond this one delivery."""

    DEACTIVATE_DEVICE = "deactivate_device"  # push token unregistered or invalid
    SUPPRESS_ADDRESS = "suppress_address"  # hard bounce, invalid number, STOP reply


_IN_PROGRESS = frozenset({Status.PENDING, Status.QUEUED, Status.SENDING})

# Every legal move; anything else is a bug.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.PENDING: frozenset(
        {Status.SENDING, Status.QUEUED, Status.SKIPPED, Status.CANCELLED, Status.EXPIRED}
    ),
    Status.QUEUED: frozenset(
        {Status.SENDING, Status.PENDING, Status.CANCELLED, Status.EXPIRED, Status.SKIPPED}
    ),
    Status.SENDING: frozenset(
        {
            Status.SENT,
            Status.PENDING,  # transient failure with attempts left, deferral, lease expiry
            # Also the reaper's: a lease lost during an at-most-once provider call (ambiguous).
            Status.FAILED,
            Status.SKIPPED,  # send-time policy check
            Status.EXPIRED,
            Status.CANCELLED,
        }
    ),
    # FAILED after SENT: the provider accepted it, then said it will not deliver it
    # (Twilio failed/undelivered, SendGrid dropped).
    Status.SENT: frozenset({Status.DELIVERED, Status.BOUNCED, Status.FAILED}),
    Status.DELIVERED: frozenset({Status.BOUNCED}),
    Status.BOUNCED: frozenset(),
    Status.FAILED: frozenset({Status.PENDING}),  # replay from the dead-letter queue
    Status.SKIPPED: frozenset(),
    Status.CANCELLED: frozenset(),
    Status.EXPIRED: frozenset(),
}


def can_move(current: Status, target: Status) -> bool:
    return target in TRANSITIONS[current]
