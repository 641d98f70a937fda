"""campaigns: the campaign table and the index of a campaign's deliveries

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema
from tidings.store.schema import JSONDoc

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, tidings.store.schema.UTCDateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "campaign",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sa.String(length=100), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("type", sa.String(length=100), nullable=False),
        sa.Column("category", sa.String(length=20), nullable=False),
        sa.Column("priority", sa.String(length=10), nullable=False),
        sa.Column("audience", JSONDoc, nullable=False),
        sa.Column("data", JSONDoc, nullable=False),
        sa.Column("channels", JSONDoc, nullable=False),
        _ts("send_at", nullable=False),
        sa.Column("spread_seconds", sa.Integer(), nullable=False),
        sa.Column("local_time", sa.String(length=5), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("audience_size", sa.Integer(), nullable=True),
        sa.Column("cursor", sa.String(length=255), nullable=True),
        sa.Column("expanded", sa.Integer(), nullable=False),
        sa.Column("deliveries", sa.Integer(), nullable=False),
        sa.Column("expander", sa.String(length=64), nullable=True),
        _ts("lease_until"),
        _ts("created_at", nullable=False),
        _ts("updated_at", nullable=False),
        _ts("started_at"),
        _ts("expanded_at"),
        _ts("finished_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaign")),
        sa.UniqueConstraint(
            "namespace", "idempotency_key", name=op.f("uq_campaign_namespace_idempotency_key")
        ),
    )
    op.create_index("ix_campaign_status_send_at", "campaign", ["status", "send_at"])
    op.create_index("ix_campaign_namespace_created_at", "campaign", ["namespace", "created_at"])
    op.create_index(
        "ix_delivery_campaign",
        "delivery",
        ["campaign_id", "status"],
        postgresql_where=sa.text("campaign_id IS NOT NULL"),
        sqlite_where=sa.text("campaign_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_delivery_campaign", table_name="delivery")
    op.drop_index("ix_campaign_namespace_created_at", table_name="campaign")
    op.drop_index("ix_campaign_status_send_at", table_name="campaign")
    op.drop_table("campaign")
