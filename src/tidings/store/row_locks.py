"""The one order in which statements lock several delivery rows: by id.

The Kafka lane's claim (store/queue.py) locks its tickets' rows by id and must wait for
them (a relay may not have committed yet). Any statement that locks several of the same
rows in another order (the order it finds them in) can wait on the claim while the claim
waits on it: PostgreSQL then kills one of them (issue 23, the reaper). So such statements
pick their rows in a CTE, ``ORDER BY id FOR UPDATE``, and update those. On SQLite the
transaction holds the one write lock since BEGIN: the dialect adds no lock clause
(store/dialects/), and the statement finds the same rows as before.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import delivery


def locked_in_id_order(
    db: Database, query: sa.Select[Any], *, skip_locked: bool = False
) -> sa.Select[Any]:
    """The delivery ids ``query`` selects (it selects ``delivery.c.id``), locked in id order,
    as a subquery for ``delivery.c.id.in_``. ``skip_locked``: pass by the rows another
    transaction holds (a sweep that comes again), instead of waiting for them."""
    ordered = query.order_by(delivery.c.id)
    locked = db.dialect.locked(ordered, skip_locked=skip_locked).cte("locked")
    return sa.select(locked.c.id)
