"""Time-ordered identifiers (UUID v7), so new rows land at the end of their indexes."""

from __future__ import annotations

import uuid

from uuid_utils.compat import uuid7


def new_id() -> uuid.UUID:
    return uuid7()
