"""provider webhook events already applied (dedupe of retried deliveries)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_seen",
        sa.Column("provider", sa.String(length=100), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("provider", "event_id", name=op.f("pk_webhook_seen")),
    )
    op.create_index("ix_webhook_seen_at", "webhook_seen", ["at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_webhook_seen_at", table_name="webhook_seen")
    op.drop_table("webhook_seen")
