"""``Retry-After`` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as seconds from now.

The one parser every adapter uses (SendGrid, Twilio, FCM and its OAuth endpoint, APNs,
webhooks), so that they agree on what a provider's header means.
"""

from __future__ import annotations

import math
import time
from datetime import UTC
from email.utils import parsedate_to_datetime


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait, or None when absent or unreadable (the retry policy decides then).

    Lenient where servers are: fractional seconds are taken, a date without a zone is UTC
    (HTTP dates are always GMT), and a date in the past means no wait.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        return _seconds_until(text, time.time() if now is None else now)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _seconds_until(date: str, now: float) -> float | None:
    try:
        moment = parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, moment.timestamp() - now)
