"""templates, and a type's default locale and collapse key

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import tidings.store.schema

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "template",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(length=100), nullable=False),
        sa.Column("channel", sa.String(length=20), nullable=False),
        sa.Column("locale", sa.String(length=35), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("html", sa.Text(), nullable=True),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("created_at", tidings.store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_template")),
        sa.UniqueConstraint(
            "type",
            "channel",
            "locale",
            "version",
            name=op.f("uq_template_type_channel_locale_version"),
        ),
    )
    with op.batch_alter_table("notification_type", schema=None) as batch_op:
        batch_op.add_column(sa.Column("default_locale", sa.String(length=35), nullable=True))
        batch_op.add_column(sa.Column("collapse_key", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notification_type", schema=None) as batch_op:
        batch_op.drop_column("collapse_key")
        batch_op.drop_column("default_locale")
    op.drop_table("template")
