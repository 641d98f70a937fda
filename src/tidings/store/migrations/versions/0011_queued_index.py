"""queued index: what each Kafka topic holds, counted by the relay

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_delivery_queued",
        "delivery",
        ["priority", "channel"],
        unique=False,
        postgresql_where=sa.text("status = 'QUEUED'"),
        sqlite_where=sa.text("status = 'QUEUED'"),
    )


def downgrade() -> None:
    op.drop_index("ix_delivery_queued", table_name="delivery")
