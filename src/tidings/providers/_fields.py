"""Reading the fields of a provider's callback: the small parsers every event mapping and
receiver needs, once (a provider's body is untrusted JSON or form text)."""

from __future__ import annotations

import json
import uuid
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
