"""``tidings partitions``: put a PostgreSQL database that the migrations left on plain
tables on day partitions, and show its layout (docs/architecture.md, Retention and
partitions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidings.cli.common import (
    Command,
    ConfigOption,
    console,
    fail,
    in_database,
    load_settings,
    new_typer,
)

if TYPE_CHECKING:  # imported where used: every `tidings` call loads this module
    from tidings.store.engine import Database
    from tidings.store.partitions import PartitionStatus

partitions = new_typer(
    "Day partitions (PostgreSQL): notifications, deliveries and events by UTC day, old days "
    "dropped whole by retention. The default: `tidings migrate` puts a new or small database "
    "on them; `enable` moves a larger one, which the migration leaves on plain tables."
)


@partitions.command("enable", cls=Command)
def enable(config: ConfigOption = None) -> None:
    """Move notification, delivery and delivery_event onto day partitions (PostgreSQL
    only): for a database `tidings migrate` left on plain tables, too large to convert as
    a process starts. One transaction: the rows are copied into partitions from the oldest
    row's day to today + partitions_ahead. The three tables are locked exclusively for the
    whole copy (the API's inserts and the dispatchers wait, or time out): run it in a
    maintenance window. There is no command back: restore a backup to undo."""
    from tidings.clock import utcnow
    from tidings.store.partitions import PartitionsUnavailable, enable_partitions

    ahead = load_settings(config).partitions_ahead

    async def work(db: Database) -> str:
        try:
            done = await enable_partitions(db, utcnow().date(), ahead)
        except PartitionsUnavailable as error:
            fail(str(error))
        rows = ", ".join(f"{table} {count:,}" for table, count in done.rows.items())
        return f"day partitions {done.first_day} to {done.last_day}; rows copied: {rows}"

    console.print(in_database(config, work), highlight=False, soft_wrap=True)


@partitions.command("status", cls=Command)
def status(config: ConfigOption = None) -> None:
    """Whether the database is on day partitions, and each table's days."""
    from tidings.store.partitions import partition_status

    found = in_database(config, partition_status)
    console.print(_describe(found), highlight=False, soft_wrap=True)


def _describe(found: PartitionStatus) -> str:
    if not found.partitioned:
        return (
            "not partitioned (plain tables; retention deletes old rows in batches; on "
            "PostgreSQL `tidings partitions enable` moves them onto day partitions)"
        )
    lines = ["partitioned by day"]
    for table, days in found.days.items():
        span = f"{days[0]} to {days[-1]}" if days else "none"
        lines.append(f"{table}: {len(days)} days, {span}")
        lines.append("  " + " ".join(f"{day:%Y-%m-%d}" for day in days))
    return "\n".join(lines)
