"""early event: a provider event that waits until its delivery's account is known

A webhook event about a delivery still being sent, whose account is not yet recorded as the
one the event came from (the outcome naming it is written in batches), waits whole in
early_status: ``pending`` holds the accounts it came through and what it would record
(history kind, detail, suppression); ``status`` is NULL for an event that moves nothing.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import JSONDoc

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Batch mode: SQLite cannot drop a NOT NULL in place (the table is small and transient).
    with op.batch_alter_table("early_status") as batch:
        batch.add_column(sa.Column("pending", JSONDoc, nullable=True))
        batch.alter_column("status", existing_type=sa.String(length=12), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM early_status WHERE pending IS NOT NULL OR status IS NULL")
    with op.batch_alter_table("early_status") as batch:
        batch.alter_column("status", existing_type=sa.String(length=12), nullable=False)
        batch.drop_column("pending")
