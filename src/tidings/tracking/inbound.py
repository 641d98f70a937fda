"""Replies to an SMS number: the opt-out keywords carriers and Twilio honour.

STOP, STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT, REVOKE and OPTOUT (the whole message, any
case) opt the sender out: their number is suppressed for SMS (reason ``stop_reply``), as
Twilio itself then refuses to message it (error 21610). START, UNSTOP and YES opt back in:
a suppression that a STOP made is lifted; one with another reason (an invalid number) stays.
HELP and INFO, and every other reply, change nothing.
"""

from __future__ import annotations

from datetime import datetime

from tidings.priorities import Channel
from tidings.store import suppressions
from tidings.store.engine import Database

STOP_WORDS = frozenset(
    {"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE", "OPTOUT"}
)
START_WORDS = frozenset({"START", "UNSTOP", "YES"})
# The reasons a START lifts: those a STOP (a reply, or Twilio's 21610 and callbacks) set.
STOP_REASONS = frozenset({"stop_reply", "unsubscribed_stop"})
REASON = "stop_reply"
EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


def keyword(body: str) -> str:
    return body.strip().upper()


async def apply_reply(db: Database, sender: str, body: str, now: datetime) -> str | None:
    """Suppress or lift ``sender`` per its reply; what was done (``suppressed``, ``lifted``)."""
    word = keyword(body)
    if not sender:
        return None
    if word in STOP_WORDS:
        await suppressions.put(db, Channel.SMS.value, sender, REASON, now)
        return "suppressed"
    if word in START_WORDS:
        found = await suppressions.get(db, Channel.SMS.value, sender)
        if found is not None and found["reason"] in STOP_REASONS:
            await suppressions.delete(db, Channel.SMS.value, sender)
            return "lifted"
    return None
