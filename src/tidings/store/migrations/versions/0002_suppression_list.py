"""suppression list

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "suppression",
        sa.Column("channel", sa.String(length=20), nullable=False),
        sa.Column("address", sa.String(length=4096), nullable=False),
        sa.Column("reason", sa.String(length=255), nullable=False),
        sa.Column("created_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("channel", "address", name=op.f("pk_suppression")),
    )


def downgrade() -> None:

    op.drop_table("suppression")
