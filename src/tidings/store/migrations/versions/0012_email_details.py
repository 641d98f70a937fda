"""email details: a type's sender and a notification's reply-to and copies

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import JSONDoc

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable and without a default: adding them rewrites no row, on either database.
    op.add_column("notification_type", sa.Column("email", JSONDoc, nullable=True))
    op.add_column("notification", sa.Column("email", JSONDoc, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notification") as batch:
        batch.drop_column("email")
    with op.batch_alter_table("notification_type") as batch:
        batch.drop_column("email")
