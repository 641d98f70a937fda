"""Reading the fields of a provider's callback: the small parsers every event mapping and
receiver needs, once (a provider's body is untrusted JSON or form text)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

# Kept of a provider's identifier or word (webhook_seen.event_id, provider message ids).
MAX_TEXT = 255


def uuid_or_none(value: Any) -> uuid.UUID | None:
    """``value`` as a UUID (the delivery id tidings sent along), or None."""
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def text(value: Any) -> str | None:
    """A non-empty string, cut to ``MAX_TEXT``; None for anything else."""
    return value[:MAX_TEXT] if isinstance(value, str) and value else None


def json_object(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or None (not JSON, not an object, absurdly nested)."""
    try:
        found = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError included
        return None
    return found if isinstance(found, dict) else None


def unix_time(value: Any, now: datetime) -> datetime:
    """An event's Unix time (seconds, perhaps fractional); ``now`` when absent or absurd."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 2**33:
        return datetime.fromtimestamp(value, UTC)
    return now


def history_detail(source: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The fields worth keeping in the history (never the address: it is on the delivery);
    long texts (bounce dumps, SMTP answers) cut short."""
    kept: dict[str, Any] = {}
    for name in names:
        value = source.get(name)
        if value in (None, ""):
            continue
        kept[name] = value[:1000] if isinstance(value, str) else value
    return kept
