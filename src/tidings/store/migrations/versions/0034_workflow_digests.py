"""workflow digests: the digest table, and a digest step's key and digest

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import UTCDateTime

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("workflow_step", sa.Column("digest_key", sa.String(255), nullable=True))
    op.add_column("workflow_step", sa.Column("digest_id", sa.Uuid, nullable=True))
    op.create_index(
        "ix_workflow_step_digest_id",
        "workflow_step",
        ["digest_id"],
        postgresql_where=sa.text("digest_id IS NOT NULL"),
        sqlite_where=sa.text("digest_id IS NOT NULL"),
    )
    op.create_table(
        "workflow_digest",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("namespace", sa.String(100), nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("digest_key", sa.String(255), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("max", sa.Integer, nullable=False),
        sa.Column("leader_step_id", sa.Uuid, nullable=False),
        sa.Column("opened_at", UTCDateTime(), nullable=False),
        sa.Column("closes_at", UTCDateTime(), nullable=False),
        sa.Column("closed_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_workflow_digest"),
    )
    op.create_index(
        "ix_workflow_digest_open",
        "workflow_digest",
        ["namespace", "type", "user_id", "digest_key"],
        unique=True,
        postgresql_where=sa.text("state = 'OPEN'"),
        sqlite_where=sa.text("state = 'OPEN'"),
    )


def downgrade() -> None:
    op.drop_table("workflow_digest")
    op.drop_index("ix_workflow_step_digest_id", table_name="workflow_step")
    with op.batch_alter_table("workflow_step") as batch:
        batch.drop_column("digest_id")
        batch.drop_column("digest_key")
