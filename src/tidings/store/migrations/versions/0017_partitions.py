"""partitions: what day partitions need, on plain tables; idempotency_key

The tables stay unpartitioned here: revision 0026 moves a PostgreSQL database onto day
partitions (or `tidings partitions enable` does, store/partitions.py). This revision makes
the schema both layouts share, on both databases: the delivery and event keys gain the
partition key ((id, notification_id), (id, delivery_id)), the foreign keys between the three
tables go (they would keep a day from being detached), and idempotency keys move to their
own table, filled from the notifications, whose unique (namespace, idempotency_key) goes.
PostgreSQL alters the tables in place (the two primary keys are rebuilt, the tables locked
meanwhile); SQLite, which cannot alter keys, copies the three tables.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from tidings.store.schema import JSONDoc, UTCDateTime, metadata

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("notification", "delivery", "delivery_event")


def _ts(name: str, nullable: bool = True) -> sa.Column[Any]:
    return sa.Column(name, UTCDateTime(), nullable=nullable)


def _where(condition: str) -> dict[str, Any]:
    return {"postgresql_where": sa.text(condition), "sqlite_where": sa.text(condition)}


def _new_tables() -> sa.MetaData:
    """The three tables and the key table as of this revision (not the live models, which
    later revisions change): SQLite's copy, and the key table on both."""
    meta = sa.MetaData(naming_convention=metadata.naming_convention)
    sa.Table(
        "notification",
        meta,
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("namespace", sa.String(100), nullable=False),
        sa.Column("idempotency_key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("category", sa.String(20), nullable=False),
        sa.Column("priority", sa.String(10), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=True),
        sa.Column("data", JSONDoc, nullable=False),
        sa.Column("locale", sa.String(35), nullable=True),
        sa.Column("campaign_id", sa.Uuid, nullable=True),
        sa.Column("email", JSONDoc, nullable=True),
        sa.Column("request_id", sa.String(64), nullable=True),
        _ts("send_at"),
        _ts("created_at", nullable=False),
    )
    sa.Table(
        "idempotency_key",
        meta,
        sa.Column("namespace", sa.String(100), primary_key=True),
        sa.Column("idempotency_key", sa.String(255), primary_key=True),
        sa.Column("notification_id", sa.Uuid, nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        _ts("created_at", nullable=False),
        sa.Index("ix_idempotency_key_created_at", "created_at"),
    )
    _delivery(meta)
    sa.Table(
        "delivery_event",
        meta,
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("delivery_id", sa.Uuid, primary_key=True, index=True),
        sa.Column("kind", sa.String(30), nullable=False),
        _ts("at", nullable=False),
        sa.Column("detail", JSONDoc, nullable=True),
    )
    return meta


def _delivery(meta: sa.MetaData) -> None:
    sa.Table(
        "delivery",
        meta,
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("notification_id", sa.Uuid, primary_key=True),
        sa.Column("channel", sa.String(20), nullable=False),
        sa.Column("address", sa.String(4096), nullable=False),
        sa.Column("priority", sa.String(10), nullable=False),
        sa.Column("category", sa.String(20), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        _ts("next_attempt_at"),
        _ts("lease_until"),
        sa.Column("provider", sa.String(100), nullable=True),
        sa.Column("provider_msg_id", sa.String(255), nullable=True),
        sa.Column("template_version", sa.Integer, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("failure_kind", sa.String(12), nullable=True),
        sa.Column("skip_reason", sa.String(40), nullable=True),
        sa.Column("campaign_id", sa.Uuid, nullable=True),
        _ts("created_at", nullable=False),
        _ts("sent_at"),
        _ts("updated_at", nullable=False),
        sa.UniqueConstraint("notification_id", "channel", "address"),
        sa.Index("ix_delivery_due", "priority", "next_attempt_at", **_where("status = 'PENDING'")),
        sa.Index("ix_delivery_lease", "lease_until", **_where("lease_until IS NOT NULL")),
        sa.Index("ix_delivery_provider_msg", "provider", "provider_msg_id"),
        sa.Index("ix_delivery_queued", "priority", "channel", **_where("status = 'QUEUED'")),
        sa.Index(
            "ix_delivery_campaign", "campaign_id", "status", **_where("campaign_id IS NOT NULL")
        ),
        sa.Index("ix_delivery_failed", "updated_at", **_where("status = 'FAILED'")),
        sa.Index(
            "ix_delivery_sent",
            "sent_at",
            "priority",
            "channel",
            "provider",
            **_where("sent_at IS NOT NULL"),
        ),
    )


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _alter_in_place(bind)
    else:
        _copy_tables(bind)
    op.execute(
        "INSERT INTO idempotency_key (namespace, idempotency_key, notification_id, "
        "request_hash, created_at) SELECT namespace, idempotency_key, id, request_hash, "
        "created_at FROM notification"
    )


def _alter_in_place(bind: sa.Connection) -> None:
    """PostgreSQL: drop the foreign keys and the key's unique constraint, widen the two
    primary keys, make the key table. No row is copied."""
    inspector = sa.inspect(bind)
    for table in reversed(TABLES):
        for fk in inspector.get_foreign_keys(table):
            op.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{fk["name"]}"')
    for unique in inspector.get_unique_constraints("notification"):
        if unique["column_names"] == ["namespace", "idempotency_key"]:
            op.execute(f'ALTER TABLE notification DROP CONSTRAINT "{unique["name"]}"')
    for table, key in (("delivery", "notification_id"), ("delivery_event", "delivery_id")):
        old = inspector.get_pk_constraint(table)["name"]
        op.execute(
            f'ALTER TABLE {table} DROP CONSTRAINT "{old}", '
            f'ADD CONSTRAINT "pk_{table}" PRIMARY KEY (id, {key})'
        )
    _new_tables().tables["idempotency_key"].create(bind)


def _copy_tables(bind: sa.Connection) -> None:
    """SQLite: set the three tables aside, create them anew (with the key table), copy the
    rows, drop the old ones."""
    _set_old_tables_aside(bind)
    meta = _new_tables()
    meta.create_all(bind)
    for table in TABLES:
        columns = ", ".join(c.name for c in meta.tables[table].columns)
        op.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {table}_old")
    for table in reversed(TABLES):
        op.execute(f"DROP TABLE {table}_old")


def _set_old_tables_aside(bind: sa.Connection) -> None:
    """Rename the three tables to ``*_old``, first freeing the index names the new ones
    take (the copy needs none of them)."""
    inspector = sa.inspect(bind)
    for table in TABLES:
        for index in inspector.get_indexes(table):
            if not index.get("duplicates_constraint"):
                op.execute(f'DROP INDEX "{index["name"]}"')
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} RENAME TO {table}_old")


def downgrade() -> None:
    raise NotImplementedError(
        "0017 (partitions) cannot be downgraded: restore a backup taken before the upgrade"
    )
