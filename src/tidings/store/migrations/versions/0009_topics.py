"""topics: who follows what

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "topic_subscription",
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("created_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("topic", "user_id", name=op.f("pk_topic_subscription")),
    )
    op.create_index(
        "ix_topic_subscription_user_id", "topic_subscription", ["user_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_topic_subscription_user_id", table_name="topic_subscription")
    op.drop_table("topic_subscription")
