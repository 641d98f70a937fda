"""reports: counters folded from the event log, per campaign and per type and day

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "report_counter",
        sa.Column("scope", sa.String(length=400), nullable=False),
        sa.Column("metric", sa.String(length=60), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "metric", name=op.f("pk_report_counter")),
    )
    op.create_table(
        "report_unique",
        sa.Column("delivery_id", sa.Uuid(), nullable=False),
        sa.Column("metric", sa.String(length=30), nullable=False),
        sa.PrimaryKeyConstraint("delivery_id", "metric", name=op.f("pk_report_unique")),
    )
    op.create_table(
        "report_cursor",
        sa.Column("name", sa.String(length=20), nullable=False),
        sa.Column("txid", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_report_cursor")),
    )
    # Reports count from the events written since the event log began (migration 0019).
    op.execute("INSERT INTO report_cursor (name, txid, event_id) VALUES ('reports', 0, 0)")


def downgrade() -> None:
    op.drop_table("report_cursor")
    op.drop_table("report_unique")
    op.drop_table("report_counter")
