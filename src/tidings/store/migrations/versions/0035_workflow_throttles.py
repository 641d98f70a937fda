"""workflow throttles: when each throttle group's notifications passed

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import JSONDoc, UTCDateTime

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workflow_throttle",
        sa.Column("namespace", sa.String(100), nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("throttle_key", sa.String(255), nullable=False),
        sa.Column("passed", JSONDoc, nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint(
            "namespace", "type", "user_id", "throttle_key", name="pk_workflow_throttle"
        ),
    )


def downgrade() -> None:
    op.drop_table("workflow_throttle")
