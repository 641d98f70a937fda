"""``Retry-After`` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as seconds from now."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait, or None when absent or unreadable (the retry policy decides then)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))
