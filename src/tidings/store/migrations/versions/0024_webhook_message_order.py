"""webhook message order: a notification's messages in the order of their events

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ORDER = ("endpoint_id", "order_key", "event_txid", "event_id")


def upgrade() -> None:
    # Messages made before have no place: 0 puts them first, in the order of their ids.
    for name in ("event_txid", "event_id"):
        column = sa.Column(name, sa.BigInteger(), nullable=False, server_default="0")
        op.add_column("webhook_message", column)
    op.drop_index("ix_webhook_message_order", table_name="webhook_message")
    op.create_index("ix_webhook_message_order", "webhook_message", list(_ORDER), unique=False)


def downgrade() -> None:
    op.drop_index("ix_webhook_message_order", table_name="webhook_message")
    op.create_index(
        "ix_webhook_message_order",
        "webhook_message",
        ["endpoint_id", "order_key", "id"],
        unique=False,
    )
    for name in ("event_id", "event_txid"):
        op.drop_column("webhook_message", name)
