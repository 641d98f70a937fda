"""type workflow: a notification type's steps (docs/workflows.md)

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import JSONDoc

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("notification_type", sa.Column("workflow", JSONDoc, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notification_type") as batch:
        batch.drop_column("workflow")
