"""Users as a set: listing and searching profiles, importing them in batches, erasing one
(one profile at a time is the registry's: ``services/registry.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidings.clock import utcnow
from tidings.store import users
from tidings.store.engine import Database
from tidings.store.erasure import Erased, erase_user
from tidings.store.users import UserProfile, list_users

__all__ = ["Erased", "UserProfile", "erase_user", "list_users", "put_users"]


async def put_users(db: Database, rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """Create or replace the profiles ``rows`` (each with its ``id``), all or none; how many
    were created and how many replaced."""
    replaced = await users.put_users(db, rows, utcnow())
    return len(rows) - replaced, replaced
