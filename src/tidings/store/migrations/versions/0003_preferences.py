"""preferences

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import tidings.store.schema

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "preference",
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("category", sa.String(length=20), nullable=False),
        sa.Column("channel", sa.String(length=20), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "category", "channel", name=op.f("pk_preference")),
    )
    with op.batch_alter_table("notification_type", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "required_channels",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )

    with op.batch_alter_table("user_profile", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "quiet_hours",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )


def downgrade() -> None:

    with op.batch_alter_table("user_profile", schema=None) as batch_op:
        batch_op.drop_column("quiet_hours")

    with op.batch_alter_table("notification_type", schema=None) as batch_op:
        batch_op.drop_column("required_channels")

    op.drop_table("preference")
