"""inbox: the in-app feed's messages (docs/inbox.md)

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import JSONDoc, UTCDateTime

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "inbox_message",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("delivery_id", sa.Uuid, nullable=False),
        sa.Column("notification_id", sa.Uuid, nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("category", sa.String(20), nullable=False),
        sa.Column("subject", sa.Text, nullable=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("data", JSONDoc, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("seen_at", UTCDateTime(), nullable=True),
        sa.Column("read_at", UTCDateTime(), nullable=True),
        sa.Column("archived_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_inbox_message"),
        sa.UniqueConstraint("delivery_id", name="uq_inbox_message_delivery_id"),
    )
    op.create_index("ix_inbox_message_user_id_id", "inbox_message", ["user_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_inbox_message_user_id_id", table_name="inbox_message")
    op.drop_table("inbox_message")
