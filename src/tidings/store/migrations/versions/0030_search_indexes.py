"""search indexes: a namespace's notifications by user, type and campaign, newest first,
and deliveries by address (GET /v1/notifications, store/search.py)

On day partitions an index made on the parent is made on every day's partition (and on each
day attached later). ``IF NOT EXISTS``: a database moved onto day partitions by 0026 at its
migration got them already (the conversion makes the models' indexes). On a large database
this migration builds them while it holds the tables: plan it in a maintenance window.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_notification_user",
        "notification",
        ["namespace", "user_id", "id"],
        if_not_exists=True,
        postgresql_where=sa.text("user_id IS NOT NULL"),
        sqlite_where=sa.text("user_id IS NOT NULL"),
    )
    op.create_index(
        "ix_notification_type", "notification", ["namespace", "type", "id"], if_not_exists=True
    )
    op.create_index(
        "ix_notification_campaign",
        "notification",
        ["campaign_id", "id"],
        if_not_exists=True,
        postgresql_where=sa.text("campaign_id IS NOT NULL"),
        sqlite_where=sa.text("campaign_id IS NOT NULL"),
    )
    op.create_index(
        "ix_delivery_address",
        "delivery",
        ["address", "notification_id"],
        if_not_exists=True,
        postgresql_where=sa.text("address <> ''"),
        sqlite_where=sa.text("address <> ''"),
    )


def downgrade() -> None:
    op.drop_index("ix_delivery_address", table_name="delivery")
    op.drop_index("ix_notification_campaign", table_name="notification")
    op.drop_index("ix_notification_type", table_name="notification")
    op.drop_index("ix_notification_user", table_name="notification")
