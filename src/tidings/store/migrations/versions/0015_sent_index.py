"""sent index: what was sent in the last hour, per lane, channel and provider (the dashboard)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_delivery_sent",
        "delivery",
        ["sent_at", "priority", "channel", "provider"],
        unique=False,
        postgresql_where=sa.text("sent_at IS NOT NULL"),
        sqlite_where=sa.text("sent_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_delivery_sent", table_name="delivery")
