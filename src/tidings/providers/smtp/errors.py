"""Classifying SMTP replies (RFC 5321 §4.2, RFC 3463 enhanced status codes).

The enhanced code (``class.subject.detail``) decides where it is specific, the basic code
otherwise: 4yz transient, 5yz permanent. Exceptions that matter for the address:

- 5.1.x on a recipient (bad mailbox, no such domain): a hard bounce, suppress the address;
  but 5.1.7/5.1.8 are about the sender, and a refused sender never suppresses a recipient.
- x.2.2 mailbox full: a soft bounce, retried even when the server says 5.2.2.
- 552 without an enhanced code, 5.3.4 and 5.2.3: the message is too large; poison.
- 5.7.x security/policy: not a bad address; permanent without suppression.
- 530/534/535/538 authentication: our configuration. Transient with a long retry, so that
  nothing is lost or suppressed while an operator fixes the credentials.
- 503 bad sequence of commands: the client's session state, not the message; transient.
- x.6.7 non-ASCII address not permitted (RFC 6531): permanent, the address is not suppressed.
"""

from __future__ import annotations

import re

from tidings.providers.base import PermanentError, PoisonError, ProviderError, TransientError
from tidings.states import Effect

# Seconds before retrying after an authentication failure (a configuration problem).
AUTH_RETRY_AFTER = 300.0
_AUTH_CODES = {530, 534, 535, 538}
_ENHANCED = re.compile(r"^\s*([245])\.(\d{1,3})\.(\d{1,3})\b")
_SENDER_STATUSES = {"1.7", "1.8"}
_TOO_LARGE = {"5.3.4", "5.2.3"}


def enhanced_code(text: str) -> str | None:
    """``"5.1.1"`` from ``"5.1.1 <a@b>: Recipient address rejected"``, if present."""
    match = _ENHANCED.match(text)
    return ".".join(match.groups()) if match else None


def classify_reply(code: int, text: str, *, recipient: bool) -> ProviderError:
    """The error for a negative reply; ``recipient``: the reply refused the recipient."""
    status = enhanced_code(text)
    detail = f"SMTP {code} {text}".strip()
    subject_detail = status.split(".", 1)[1] if status else None
    if code in _AUTH_CODES:
        return TransientError(detail, retry_after=AUTH_RETRY_AFTER, reason="auth_failed")
    if code == 503:
        return TransientError(detail, reason="bad_sequence")
    if subject_detail == "2.2":
        return TransientError(detail, reason="mailbox_full")
    if code < 500 or (status is not None and status.startswith("4")):
        return TransientError(detail, reason=f"smtp_{code}")
    if status in _TOO_LARGE or (code == 552 and status is None):
        return PoisonError(detail, reason="message_too_large")
    if status is not None and status.startswith("5.1.") and subject_detail not in _SENDER_STATUSES:
        if recipient:
            return PermanentError(detail, effect=Effect.SUPPRESS_ADDRESS, reason="hard_bounce")
    if status is not None and status.startswith("5.7."):
        return PermanentError(detail, reason="policy")
    if status == "5.6.7":
        return PermanentError(detail, reason="smtputf8_unsupported")
    return PermanentError(detail, reason=f"smtp_{code}")
