"""The database's upkeep: ``tidings migrate`` and ``tidings retention``."""

from __future__ import annotations

import asyncio

from tidings.cli.common import ConfigOption, console, load_settings


def migrate(config: ConfigOption = None) -> None:
    """Create or upgrade the database schema to the latest migration. On PostgreSQL a new
    or small database is put on day partitions; a larger one stays on plain tables until
    `tidings partitions enable`."""
    from tidings.store.engine import connect
    from tidings.store.migrate import current_revision, upgrade
    from tidings.store.partitions import partition_status

    async def _migrate() -> str:
        settings = load_settings(config)
        db = connect(settings.database_url)
        try:
            await upgrade(db, partitions_ahead=settings.partitions_ahead)
            done = f"schema at revision {await current_revision(db)}"
            if not db.dialect.partitions:
                return done
            found = await partition_status(db)
        finally:
            await db.dispose()
        if not found.partitioned:
            return f"{done}\nplain tables, not day partitions: see `tidings partitions enable`"
        days = found.days["notification"]
        return f"{done}\nday partitions {days[0]} to {days[-1]}" if days else done

    console.print(asyncio.run(_migrate()), highlight=False, soft_wrap=True)


def retention(config: ConfigOption = None) -> None:
    """Apply the retention now (dispatchers do it hourly): delete in batches the
    notifications older than retention_days whose deliveries are all final (or, on day
    partitions, drop such days and make the partitions ahead), prune idempotency keys older
    than idempotency_days."""
    from tidings.clock import utcnow
    from tidings.store.engine import connect
    from tidings.store.partitions import ensure_partitions, run_retention

    settings = load_settings(config)

    async def _apply() -> str:
        db = connect(settings.database_url)
        try:
            now = utcnow()
            await ensure_partitions(db, now.date(), settings.partitions_ahead)
            done = await run_retention(db, now, settings.retention_days, settings.idempotency_days)
        finally:
            await db.dispose()
        dropped = ", ".join(map(str, done.dropped_days)) or "none"
        kept = ", ".join(map(str, done.kept_days)) or "none"
        return (
            f"days dropped: {dropped}\nold days kept (deliveries in progress): {kept}\n"
            f"notifications deleted: {done.notifications_deleted}\n"
            f"idempotency keys pruned: {done.keys_deleted}\n"
            f"events deleted: {done.log.events}\n"
            f"webhook messages deleted: {done.log.messages}"
        )

    console.print(asyncio.run(_apply()))
