"""previous secrets: every secret replaced in the last 24 hours still signs

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

import tidings.store.schema

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ENDPOINT = sa.table(
    "webhook_endpoint",
    sa.column("id", sa.Uuid()),
    sa.column("previous_secret", sa.String()),
    sa.column("previous_until", tidings.store.schema.UTCDateTime(timezone=True)),
    sa.column("previous_secrets", tidings.store.schema.JSONDoc),
)


def upgrade() -> None:
    op.add_column(
        "webhook_endpoint",
        sa.Column("previous_secrets", tidings.store.schema.JSONDoc, nullable=True),
    )
    bind = op.get_bind()
    rotated = bind.execute(
        sa.select(_ENDPOINT.c.id, _ENDPOINT.c.previous_secret, _ENDPOINT.c.previous_until).where(
            _ENDPOINT.c.previous_secret.is_not(None), _ENDPOINT.c.previous_until.is_not(None)
        )
    ).all()
    for row in rotated:
        kept = [{"secret": row.previous_secret, "until": row.previous_until.isoformat()}]
        bind.execute(
            sa.update(_ENDPOINT).where(_ENDPOINT.c.id == row.id).values(previous_secrets=kept)
        )
    # Not a batch: SQLite drops a column itself since 3.35.
    op.drop_column("webhook_endpoint", "previous_until")
    op.drop_column("webhook_endpoint", "previous_secret")


def downgrade() -> None:
    timestamp = tidings.store.schema.UTCDateTime(timezone=True)
    op.add_column("webhook_endpoint", sa.Column("previous_secret", sa.String(100), nullable=True))
    op.add_column("webhook_endpoint", sa.Column("previous_until", timestamp, nullable=True))
    # The newest replaced secret only: the old schema held one.
    bind = op.get_bind()
    rotated = bind.execute(
        sa.select(_ENDPOINT.c.id, _ENDPOINT.c.previous_secrets).where(
            _ENDPOINT.c.previous_secrets.is_not(None)
        )
    ).all()
    for row in rotated:
        if row.previous_secrets:
            newest = row.previous_secrets[0]
            bind.execute(
                sa.update(_ENDPOINT)
                .where(_ENDPOINT.c.id == row.id)
                .values(
                    previous_secret=newest["secret"],
                    previous_until=datetime.fromisoformat(newest["until"]),
                )
            )
    op.drop_column("webhook_endpoint", "previous_secrets")
