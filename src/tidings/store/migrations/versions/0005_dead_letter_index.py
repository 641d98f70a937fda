"""dead letter index

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    with op.batch_alter_table("delivery", schema=None) as batch_op:
        batch_op.create_index(
            "ix_delivery_failed",
            ["updated_at"],
            unique=False,
            postgresql_where=sa.text("status = 'FAILED'"),
            sqlite_where=sa.text("status = 'FAILED'"),
        )


def downgrade() -> None:

    with op.batch_alter_table("delivery", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_delivery_failed",
            postgresql_where=sa.text("status = 'FAILED'"),
            sqlite_where=sa.text("status = 'FAILED'"),
        )
