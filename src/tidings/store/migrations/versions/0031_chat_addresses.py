"""chat addresses: a user's Slack, Discord, Teams and Telegram addresses on the profile

One nullable column per chat channel (docs/providers.md, Chat), named by the channel.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (("slack", 255), ("discord", 255), ("teams", 2048), ("telegram", 33))


def upgrade() -> None:
    for name, length in COLUMNS:
        op.add_column("user_profile", sa.Column(name, sa.String(length), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("user_profile") as batch:
        for name, _ in COLUMNS:
            batch.drop_column(name)
