"""WhatsApp's 24-hour customer service window, shared by the Cloud API and Twilio adapters.

A message from a user opens a window of 24 hours in which the business may answer with free
text; outside it only an approved template may start a conversation (Meta: 131047, Twilio:
63016). The send-time checks give each whatsapp message the times its number last wrote to
each account (``Message.inbound_at``, from ``store/whatsapp_windows.py``), so free text
outside the window fails here, permanently and before any request: retrying cannot open a
window, only the user can."""

from __future__ import annotations

from datetime import datetime, timedelta

from tidings.clock import utcnow
from tidings.providers.base import Message, PermanentError

WINDOW = timedelta(hours=24)
REASON = "outside_window"


def outside_window(message: Message, account: str, now: datetime | None = None) -> None:
    """Raise PermanentError when free text to ``message``'s number is outside its window
    with ``account`` (the window is per business number, so per account)."""
    last = message.inbound_at.get(account)
    now = now or utcnow()
    if last is not None and now - last < WINDOW:
        return
    since = (
        "never wrote to this account"
        if last is None
        else f"last wrote at {last:%Y-%m-%dT%H:%M:%SZ}"
    )
    raise PermanentError(
        f"whatsapp free text outside the 24-hour customer service window (the user {since}): "
        "send an approved template instead",
        reason=REASON,
    )
