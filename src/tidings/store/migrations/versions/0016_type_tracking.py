"""type tracking: opens and clicks measured in each type's email

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import JSONDoc

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("notification_type", sa.Column("tracking", JSONDoc, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notification_type") as batch:
        batch.drop_column("tracking")
