"""early status: provider statuses that outran the outcome of their send

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    timestamp = tidings.store.schema.UTCDateTime(timezone=True)
    op.create_table(
        "early_status",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("delivery_id", sa.Uuid(), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("failure_kind", sa.String(length=12), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("at", timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_early_status")),
    )
    op.create_index(
        op.f("ix_early_status_delivery_id"), "early_status", ["delivery_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_early_status_delivery_id"), table_name="early_status")
    op.drop_table("early_status")
