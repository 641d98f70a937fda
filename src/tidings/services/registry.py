"""The registry: notification types, user profiles and push devices."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.clock import utcnow
from tidings.service import Service
from tidings.store import types, users
from tidings.store.engine import Database
from tidings.store.types import NotificationType, get_type
from tidings.store.users import Device, UserProfile, delete_device, get_device, get_user

__all__ = [
    "Device",
    "NotificationType",
    "UserProfile",
    "delete_device",
    "get_device",
    "get_type",
    "get_user",
    "put_type",
    "put_user",
    "register_device",
    "user_devices",
]


async def put_type(service: Service, kind: NotificationType) -> tuple[NotificationType, bool]:
    """Create or replace a type; the stored row, and whether it replaced one. This process's
    catalog forgets its copy at once (the others' within their ``max_age``)."""
    existed = await get_type(service.db, kind.name) is not None
    await types.put_type(service.db, kind)
    service.types.invalidate()
    stored = await get_type(service.db, kind.name)
    assert stored is not None  # just written; types are never deleted
    return stored, existed


async def put_user(
    db: Database, user_id: str, fields: Mapping[str, Any]
) -> tuple[UserProfile, bool]:
    """Create or replace a profile; the stored row, and whether it replaced one."""
    existed = await get_user(db, user_id) is not None
    await users.put_user(db, user_id, **fields, now=utcnow())
    stored = await get_user(db, user_id)
    assert stored is not None  # just written
    return stored, existed


async def register_device(db: Database, token: str, user_id: str, platform: str) -> Device:
    """Register a push token (registering it again reactivates it)."""
    await users.put_device(db, token, user_id, platform, utcnow())
    stored = await get_device(db, token)
    assert stored is not None  # just written
    return stored


async def user_devices(db: Database, user_id: str) -> list[Device]:
    """A user's push tokens, active or not."""
    return await users.user_devices(db, user_id)
