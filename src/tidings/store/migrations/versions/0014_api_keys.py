"""api keys: who may call the API, with which scopes, in which namespace; each
notification's request id

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    timestamp = tidings.store.schema.UTCDateTime(timezone=True)
    op.create_table(
        "api_key",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("namespace", sa.String(length=100), nullable=False),
        sa.Column("scopes", tidings.store.schema.JSONDoc, nullable=False),
        sa.Column("accept_rate", sa.Float(), nullable=True),
        sa.Column("created_at", timestamp, nullable=False),
        sa.Column("revoked_at", timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_key")),
        sa.UniqueConstraint("name", name=op.f("uq_api_key_name")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_key_key_hash")),
    )
    op.add_column("notification", sa.Column("request_id", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notification") as batch:
        batch.drop_column("request_id")
    op.drop_table("api_key")
