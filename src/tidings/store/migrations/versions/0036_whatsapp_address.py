"""whatsapp address: a user's WhatsApp number on the profile

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("user_profile", sa.Column("whatsapp", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("user_profile") as batch:
        batch.drop_column("whatsapp")
