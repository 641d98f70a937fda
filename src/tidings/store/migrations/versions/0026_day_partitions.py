"""day partitions by default: a PostgreSQL database moves onto them while it is small

notification, delivery and delivery_event go onto day partitions as `tidings partitions
enable` puts them (partitions.convert_at_migration, the same code): at once on a new
database, and on an existing one holding at most partitions.MIGRATION_BOUND notifications.
A larger one stays on plain tables, with a warning to run `tidings partitions enable` in a
maintenance window: every process may migrate as it starts, and copying every row there
would hold the tables locked for as long as the copy takes. An already partitioned
database is left as it is; SQLite has no partitions.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

from tidings.clock import utcnow
from tidings.store.partitions import convert_at_migration

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    bind = op.get_bind()
    attributes = context.config.attributes
    # False: a PostgreSQL database kept on plain tables (tests and benchmarks of that layout).
    if bind.dialect.name != "postgresql" or not attributes.get("day_partitions", True):
        return
    convert_at_migration(bind, utcnow().date(), int(attributes.get("partitions_ahead", 7)))


def downgrade() -> None:
    # The tables stay as they are: both layouts have one schema (migration 0017), which
    # 0025 runs on either, and nothing moves rows from partitions back onto plain tables.
    pass
