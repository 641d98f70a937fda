"""webhook endpoints: producers' receivers of events, and the messages sent to them

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    timestamp = tidings.store.schema.UTCDateTime(timezone=True)
    json = tidings.store.schema.JSONDoc
    op.create_table(
        "webhook_endpoint",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sa.String(length=100), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("events", json, nullable=False),
        sa.Column("types", json, nullable=True),
        sa.Column("secret", sa.String(length=100), nullable=False),
        sa.Column("previous_secret", sa.String(length=100), nullable=True),
        sa.Column("previous_until", timestamp, nullable=True),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("cursor_txid", sa.BigInteger(), nullable=False),
        sa.Column("cursor_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", timestamp, nullable=False),
        sa.Column("updated_at", timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoint")),
    )
    op.create_table(
        "webhook_message",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("endpoint_id", sa.Uuid(), nullable=False),
        sa.Column("order_key", sa.Uuid(), nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", timestamp, nullable=False),
        sa.Column("lease_until", timestamp, nullable=True),
        sa.Column("first_attempt_at", timestamp, nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", timestamp, nullable=False),
        sa.Column("sent_at", timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_message")),
    )
    op.create_index(
        "ix_webhook_message_due",
        "webhook_message",
        ["next_attempt_at"],
        unique=False,
        postgresql_where=sa.text("status = 'PENDING'"),
        sqlite_where=sa.text("status = 'PENDING'"),
    )
    op.create_index(
        "ix_webhook_message_order",
        "webhook_message",
        ["endpoint_id", "order_key", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_message_order", table_name="webhook_message")
    op.drop_index("ix_webhook_message_due", table_name="webhook_message")
    op.drop_table("webhook_message")
    op.drop_table("webhook_endpoint")
