"""inbound replies: SMS keyword replies (STOP, START, HELP) and what each did

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    timestamp = tidings.store.schema.UTCDateTime(timezone=True)
    op.create_table(
        "inbound_reply",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("account", sa.String(length=100), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=True),
        sa.Column("sender", sa.String(length=32), nullable=False),
        sa.Column("keyword", sa.String(length=20), nullable=True),
        sa.Column("action", sa.String(length=12), nullable=False),
        sa.Column("at", timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inbound_reply")),
        sa.UniqueConstraint("message_id", name=op.f("uq_inbound_reply_message_id")),
    )
    op.create_index("ix_inbound_reply_at", "inbound_reply", ["at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_inbound_reply_at", table_name="inbound_reply")
    op.drop_table("inbound_reply")
