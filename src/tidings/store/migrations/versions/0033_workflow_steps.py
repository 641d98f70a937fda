"""workflow steps: one row per step of a notification whose type has a workflow

Claimed, leased and fenced like deliveries (docs/workflows.md).

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import JSONDoc, UTCDateTime

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workflow_step",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("notification_id", sa.Uuid, nullable=False),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("spec", JSONDoc, nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("due_at", UTCDateTime(), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("ran_at", UTCDateTime(), nullable=True),
        sa.Column("skip_reason", sa.String(40), nullable=True),
        sa.Column("namespace", sa.String(100), nullable=False),
        sa.Column("cancel_key", sa.String(255), nullable=True),
        sa.Column("priority", sa.String(10), nullable=False),
        sa.Column("category", sa.String(20), nullable=False),
        sa.Column("deliveries", JSONDoc, nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_workflow_step"),
        sa.UniqueConstraint(
            "notification_id", "step_index", name="uq_workflow_step_notification_id_step_index"
        ),
    )
    op.create_index(
        "ix_workflow_step_due",
        "workflow_step",
        ["due_at"],
        postgresql_where=sa.text("state = 'PENDING'"),
        sqlite_where=sa.text("state = 'PENDING'"),
    )
    op.create_index(
        "ix_workflow_step_lease",
        "workflow_step",
        ["lease_until"],
        postgresql_where=sa.text("state = 'RUNNING'"),
        sqlite_where=sa.text("state = 'RUNNING'"),
    )
    op.create_index(
        "ix_workflow_step_cancel",
        "workflow_step",
        ["namespace", "cancel_key"],
        postgresql_where=sa.text("cancel_key IS NOT NULL"),
        sqlite_where=sa.text("cancel_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_table("workflow_step")
