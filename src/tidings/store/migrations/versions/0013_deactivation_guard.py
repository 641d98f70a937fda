"""deactivation guard: each push account's last trip and clear, shared by the fleet

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    timestamp = tidings.store.schema.UTCDateTime(timezone=True)
    op.create_table(
        "deactivation_guard",
        sa.Column("account", sa.String(length=100), nullable=False),
        sa.Column("tripped_at", timestamp, nullable=True),
        sa.Column("hold_until", timestamp, nullable=True),
        sa.Column("share", sa.Float(), nullable=True),
        sa.Column("samples", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(length=100), nullable=True),
        sa.Column("tripped_by", sa.String(length=64), nullable=True),
        sa.Column("cleared_at", timestamp, nullable=True),
        sa.Column("cleared_by", sa.String(length=64), nullable=True),
        sa.Column("updated_at", timestamp, nullable=False),
        sa.PrimaryKeyConstraint("account", name=op.f("pk_deactivation_guard")),
    )


def downgrade() -> None:
    op.drop_table("deactivation_guard")
