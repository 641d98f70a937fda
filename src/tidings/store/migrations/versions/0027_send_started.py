"""send started: a delivery records that its provider call began (at most once across crashes)

delivery.send_started_at is set just before an at-most-once account's provider call and
cleared by the attempt's outcome; the reaper fails a row whose lease expired with it set as
ambiguous instead of sending it again. Nullable, no default: PostgreSQL adds it without
rewriting a table, on plain tables and on day partitions alike (a column added to the
partitioned parent reaches every partition).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.partitions import is_partition_name
from tidings.store.schema import UTCDateTime

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMN = "send_started_at"


def upgrade() -> None:
    op.add_column("delivery", sa.Column(COLUMN, UTCDateTime(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        # A day table a retention pass detached and has not dropped yet (a crash between
        # the two) is attached back later: it needs the parent's columns.
        for name in _loose_delivery_days():
            op.execute(f"ALTER TABLE {name} ADD COLUMN IF NOT EXISTS {COLUMN} timestamptz")


def downgrade() -> None:
    op.drop_column("delivery", COLUMN)


def _loose_delivery_days() -> list[str]:
    rows = op.get_bind().exec_driver_sql(
        "SELECT relname FROM pg_class "
        "WHERE relkind = 'r' AND NOT relispartition AND pg_table_is_visible(oid)"
    )
    names = [str(row[0]) for row in rows]
    return [n for n in names if n.startswith("delivery_p") and is_partition_name(n)]
