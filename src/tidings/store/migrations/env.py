"""Alembic environment: runs on the connection tidings hands it (see tidings.store.migrate)."""

from __future__ import annotations

from alembic import context

from tidings.store.partitions import is_partition_name
from tidings.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `tidings migrate`, which supplies the connection")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    # Day partitions are made by code (store/partitions.py), not by the models.
    include_name=lambda name, kind, _parent: (
        kind != "table" or name is None or not is_partition_name(name)
    ),
)
with context.begin_transaction():
    context.run_migrations()
