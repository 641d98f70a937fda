"""events: every status change and tracking event, written by triggers, for the feed

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema
from tidings.store import event_triggers

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    timestamp = tidings.store.schema.UTCDateTime(timezone=True)
    op.create_table(
        "event",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("txid", sa.BigInteger(), nullable=True),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("at", timestamp, nullable=False),
        sa.Column("notification_id", sa.Uuid(), nullable=True),
        sa.Column("delivery_id", sa.Uuid(), nullable=True),
        sa.Column("campaign_id", sa.Uuid(), nullable=True),
        sa.Column("data", tidings.store.schema.JSONDoc, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_event_txid_id", "event", ["txid", "id"], unique=False)
    for statement in event_triggers.v1_statements(op.get_bind().dialect.name):
        op.execute(statement)


def downgrade() -> None:
    for statement in event_triggers.v1_drop_statements(op.get_bind().dialect.name):
        op.execute(statement)
    op.drop_index("ix_event_txid_id", table_name="event")
    op.drop_table("event")
