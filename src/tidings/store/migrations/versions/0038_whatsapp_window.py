"""whatsapp_window: when each number last wrote to each WhatsApp account (the 24-hour
customer service window)

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import UTCDateTime

revision: str = "0038"
down_revision: str | None = "0037"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "whatsapp_window",
        sa.Column("account", sa.String(100), primary_key=True),
        sa.Column("number", sa.String(16), primary_key=True),
        sa.Column("last_inbound_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("whatsapp_window")
