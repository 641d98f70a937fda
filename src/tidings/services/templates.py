"""Template versions: uploaded after the checks of an upload, listed newest first."""

from __future__ import annotations

import asyncio
from typing import Any

from tidings.clock import utcnow
from tidings.content.locales import normalise
from tidings.content.upload_checks import check_template
from tidings.priorities import Channel
from tidings.service import Service
from tidings.store import templates
from tidings.store.engine import Database
from tidings.store.templates import TemplateVersion
from tidings.store.types import NotificationType

__all__ = ["TemplateVersion", "latest", "upload", "versions"]


async def upload(
    service: Service, kind: NotificationType, channel: Channel, locale: str, parts: dict[str, Any]
) -> tuple[TemplateVersion, bool]:
    """Store ``parts`` as the type's next version for (channel, locale), unless they equal
    the newest; the version in use and whether it is new. ``TemplateProblem`` (from
    ``content/upload_checks.py``) when the parts fail the checks."""
    # Compiling a large template takes tens of milliseconds: off the event loop.
    await asyncio.to_thread(check_template, kind, channel, parts)
    stored = await templates.add_version(
        service.db, kind.name, channel.value, normalise(locale), parts, utcnow()
    )
    await service.templates.reload_now()  # this process's preview shows it at once
    return stored


async def versions(
    db: Database, type_name: str, channel: Channel, locale: str
) -> list[TemplateVersion]:
    """Every version of (type, channel, locale), newest first."""
    return await templates.versions(db, type_name, channel.value, normalise(locale))


async def latest(db: Database, type_name: str) -> list[TemplateVersion]:
    """The newest version of each (channel, locale) of a type."""
    return await templates.latest_all(db, type_name)
