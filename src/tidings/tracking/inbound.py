"""Replies to an SMS number: the opt-out keywords carriers and Twilio honour.

STOP, STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT, REVOKE and OPTOUT (the whole message, any
case) opt the sender out: their number is suppressed for SMS (reason ``stop_reply``), as
Twilio itself then refuses to message it (error 21610). START, UNSTOP and YES opt back in:
a suppression that a STOP made is lifted; one with another reason (an invalid number) stays.
HELP and INFO, and every other reply, change nothing. Each keyword reply is recorded
(``inbound_reply``: the keyword and what it did, never the text), for the operator to see
in ``GET /v1/inbound-replies``; other replies are acknowledged and not kept. A reply acts
once: Twilio retrying it, or anyone replaying its signed request, changes nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from tidings.store import inbound_replies
from tidings.store.engine import Database
from tidings.store.inbound_replies import Reply, Wanted

STOP_WORDS = frozenset(
    {"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE", "OPTOUT"}
)
START_WORDS = frozenset({"START", "UNSTOP", "YES"})
HELP_WORDS = frozenset({"HELP", "INFO"})
KEYWORDS = STOP_WORDS | START_WORDS | HELP_WORDS
# The reasons a START lifts: those a STOP (a reply, or Twilio's 21610 and callbacks) set.
STOP_REASONS = frozenset({"stop_reply", "unsubscribed_stop"})
REASON = "stop_reply"
EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


def keyword(body: str) -> str:
    return body.strip().upper()


async def apply_reply(
    db: Database, account: str, form: Mapping[str, str], now: datetime
) -> str | None:
    """Suppress or lift the sender per its reply (Twilio's form: From, Body, MessageSid),
    and record a keyword reply; what was done (``suppressed``, ``lifted``, ``none``), or
    None for a reply that is not a keyword or whose MessageSid was handled already (a
    replay acts once: store/inbound_replies.act)."""
    sender, word = form.get("From", ""), keyword(form.get("Body", ""))
    if not sender or word not in KEYWORDS:
        return None
    wanted = Wanted()
    if word in STOP_WORDS:
        wanted = Wanted(suppress=REASON)
    elif word in START_WORDS:
        wanted = Wanted(lift=STOP_REASONS)
    reply = Reply(account, form.get("MessageSid"), sender, word)
    return await inbound_replies.act(db, reply, wanted, now)
