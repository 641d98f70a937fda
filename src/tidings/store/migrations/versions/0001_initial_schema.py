"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import tidings.store.schema

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "device",
        sa.Column("token", sa.String(length=4096), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("platform", sa.String(length=10), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("deactivated_reason", sa.String(length=255), nullable=True),
        sa.Column("created_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token", name=op.f("pk_device")),
    )
    with op.batch_alter_table("device", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_device_user_id"), ["user_id"], unique=False)

    op.create_table(
        "notification",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sa.String(length=100), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=100), nullable=False),
        sa.Column("category", sa.String(length=20), nullable=False),
        sa.Column("priority", sa.String(length=10), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=True),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("locale", sa.String(length=35), nullable=True),
        sa.Column("campaign_id", sa.Uuid(), nullable=True),
        sa.Column("send_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification")),
        sa.UniqueConstraint(
            "namespace", "idempotency_key", name=op.f("uq_notification_namespace_idempotency_key")
        ),
    )
    op.create_table(
        "notification_type",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("category", sa.String(length=20), nullable=False),
        sa.Column("priority", sa.String(length=10), nullable=False),
        sa.Column(
            "channels",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("ttl_seconds", sa.Integer(), nullable=True),
        sa.Column(
            "retry",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("created_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_notification_type")),
    )
    op.create_table(
        "user_profile",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("phone", sa.String(length=20), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("locale", sa.String(length=35), nullable=True),
        sa.Column(
            "attributes",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("created_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_profile")),
    )
    op.create_table(
        "delivery",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("notification_id", sa.Uuid(), nullable=False),
        sa.Column("channel", sa.String(length=20), nullable=False),
        sa.Column("address", sa.String(length=4096), nullable=False),
        sa.Column("priority", sa.String(length=10), nullable=False),
        sa.Column("category", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column(
            "next_attempt_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("lease_until", tidings.store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("provider", sa.String(length=100), nullable=True),
        sa.Column("provider_msg_id", sa.String(length=255), nullable=True),
        sa.Column("template_version", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("failure_kind", sa.String(length=12), nullable=True),
        sa.Column("skip_reason", sa.String(length=40), nullable=True),
        sa.Column("campaign_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("sent_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("updated_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["notification_id"],
            ["notification.id"],
            name=op.f("fk_delivery_notification_id_notification"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery")),
        sa.UniqueConstraint(
            "notification_id",
            "channel",
            "address",
            name=op.f("uq_delivery_notification_id_channel_address"),
        ),
    )
    with op.batch_alter_table("delivery", schema=None) as batch_op:
        batch_op.create_index(
            "ix_delivery_due",
            ["priority", "next_attempt_at"],
            unique=False,
            postgresql_where=sa.text("status = 'PENDING'"),
            sqlite_where=sa.text("status = 'PENDING'"),
        )
        batch_op.create_index(
            "ix_delivery_lease",
            ["lease_until"],
            unique=False,
            postgresql_where=sa.text("lease_until IS NOT NULL"),
            sqlite_where=sa.text("lease_until IS NOT NULL"),
        )
        batch_op.create_index(
            "ix_delivery_provider_msg", ["provider", "provider_msg_id"], unique=False
        )

    op.create_table(
        "delivery_event",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("delivery_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=30), nullable=False),
        sa.Column("at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column(
            "detail",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["delivery.id"],
            name=op.f("fk_delivery_event_delivery_id_delivery"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery_event")),
    )
    with op.batch_alter_table("delivery_event", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_delivery_event_delivery_id"), ["delivery_id"], unique=False
        )


def downgrade() -> None:

    with op.batch_alter_table("delivery_event", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_delivery_event_delivery_id"))

    op.drop_table("delivery_event")
    with op.batch_alter_table("delivery", schema=None) as batch_op:
        batch_op.drop_index("ix_delivery_provider_msg")
        batch_op.drop_index(
            "ix_delivery_lease",
            postgresql_where=sa.text("lease_until IS NOT NULL"),
            sqlite_where=sa.text("lease_until IS NOT NULL"),
        )
        batch_op.drop_index(
            "ix_delivery_due",
            postgresql_where=sa.text("status = 'PENDING'"),
            sqlite_where=sa.text("status = 'PENDING'"),
        )

    op.drop_table("delivery")
    op.drop_table("user_profile")
    op.drop_table("notification_type")
    op.drop_table("notification")
    with op.batch_alter_table("device", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_device_user_id"))

    op.drop_table("device")
