"""event place: a delivery's events in the order of its status changes (PostgreSQL)

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store import event_triggers

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable, no default: PostgreSQL adds it without rewriting the table.
    op.add_column("delivery", sa.Column("event_txid", sa.BigInteger(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        for statement in event_triggers.V2_POSTGRES:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in event_triggers.V2_DROP_POSTGRES:
            op.execute(statement)
    # Not a batch (a copy of the table): SQLite's triggers name it. SQLite drops a column
    # itself since 3.35.
    op.drop_column("delivery", "event_txid")
