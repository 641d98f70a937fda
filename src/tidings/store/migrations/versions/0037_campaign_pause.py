"""campaign_pause: why and when a campaign paused itself (its reputation guard)

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import UTCDateTime

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE on both databases: a batch copy on SQLite would drop the campaign's
# event trigger (store/event_triggers.py).
def upgrade() -> None:
    op.add_column("campaign", sa.Column("paused_reason", sa.String(300), nullable=True))
    op.add_column("campaign", sa.Column("paused_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("campaign", "paused_at")
    op.drop_column("campaign", "paused_reason")
