"""The raw baselines again, run by ``pgbench``: the server-side limit, with no Python at all.

One SQL statement per transaction inserts what the asyncpg baseline inserts (the idempotency
key ``ON CONFLICT DO NOTHING``, the notification and its delivery), as data-modifying CTEs
off one ``ids`` row set (``gen_random_uuid()``, materialized, so all three rows share the
id). Singles: one notification per statement, prepared (``-M prepared``, as asyncpg prepares
its statements). Batches: one statement per batch, a ``VALUES`` list of the batch's items
(the same addresses and data as tidings'), sent and parsed as text every time
(``-M simple``): the rows travel from client to server as they do for the other sides.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from bench.workload import CATEGORY, CHANNEL, NAMESPACE, PRIORITY, TYPE_NAME, Item, request_hash

PGBENCH = shutil.which("pgbench") or "/usr/bin/pgbench"

# Every pgbench row carries the hash of a typical item: the same width as tidings' hashes,
# computed once here rather than by the server (which tidings never asks to hash).
_HASH = request_hash(Item("pgbench", "user0@example.com", {"orderId": 0, "total": "19.90"}))


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _statement(source: str) -> str:
    """Key, notification and delivery inserted from ``source``: rows (id, email, data)."""
    # The same columns as bench.workload's rows; NULL columns left out, as there.
    return f"""WITH src (id, email, data) AS MATERIALIZED ({source}),
keys AS (
    INSERT INTO idempotency_key
        (namespace, idempotency_key, notification_id, request_hash, created_at)
    SELECT '{NAMESPACE}', 'pgbench-' || id, id, '{_HASH}', now() FROM src
    ON CONFLICT (namespace, idempotency_key) DO NOTHING
),
notifications AS (
    INSERT INTO notification
        (id, namespace, idempotency_key, request_hash, type, category, priority, data,
         created_at)
    SELECT id, '{NAMESPACE}', 'pgbench-' || id, '{_HASH}', '{TYPE_NAME}', '{CATEGORY}',
        '{PRIORITY}', data, now() FROM src
)
INSERT INTO delivery
    (id, notification_id, channel, address, priority, category, status, attempts,
     next_attempt_at, created_at, updated_at)
SELECT gen_random_uuid(), id, '{CHANNEL}', email, '{PRIORITY}', '{CATEGORY}', 'PENDING', 0,
    now(), now(), now() FROM src;
"""


def single_script() -> str:
    """One notification per transaction; its order number drawn by pgbench (a parameter)."""
    source = (
        "SELECT gen_random_uuid(), 'user' || (:order)::int || '@example.com', "
        "jsonb_build_object('orderId', (:order)::int, 'total', '19.90')"
    )
    return "\\set order random(1, 1000000000)\n" + _statement(source)


def batch_script(batch: Sequence[Item]) -> str:
    """One transaction inserting ``batch``'s items, literally, as one statement."""
    rows = ",\n    ".join(
        f"(gen_random_uuid(), {_sql_text(item.email)}, {_sql_text(json.dumps(item.data))}::jsonb)"
        for item in batch
    )
    return _statement(f"VALUES\n    {rows}")


def dispatch_script(batch: int) -> str:
    """The dispatch baseline's claim and completion in one statement: ``batch`` due rows
    taken as the claim takes them (``FOR UPDATE SKIP LOCKED``, oldest due first) and marked
    SENT in the same ``UPDATE``. One row version per delivery where the other sides write
    two (SENDING, then SENT): the server's limit for this work, from above."""
    return f"""WITH due AS (
    SELECT id FROM delivery
    WHERE status = 'PENDING' AND priority = '{PRIORITY}' AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT {batch}
    FOR UPDATE SKIP LOCKED
)
UPDATE delivery
SET status = 'SENT', attempts = delivery.attempts + 1, provider = 'noop', sent_at = now(),
    lease_until = NULL, updated_at = now()
FROM due
WHERE delivery.id = due.id;
"""


@dataclass(frozen=True)
class Run:
    """One pgbench invocation: ``clients`` connections, ``per_client`` transactions each."""

    script: str
    clients: int
    per_client: int
    prepared: bool

    @property
    def transactions(self) -> int:
        return self.clients * self.per_client


def plan(total: int, clients: int) -> tuple[int, int]:
    """pgbench's ``-c`` and ``-t`` for about ``total`` transactions (``-t`` counts per
    client): the client count kept, ``total`` rounded up to a multiple of it."""
    clients = max(1, min(clients, total))
    return clients, math.ceil(total / clients)


_TPS = re.compile(r"^tps = ([0-9.]+) \(without initial connection time\)", re.MULTILINE)
_DONE = re.compile(r"^number of transactions actually processed: (\d+)", re.MULTILINE)


def parse(output: str) -> tuple[int, float]:
    """Transactions processed and tps (connections excluded) from pgbench's report."""
    tps, done = _TPS.search(output), _DONE.search(output)
    if tps is None or done is None:
        raise RuntimeError(f"cannot read pgbench's report:\n{output[-2000:]}")
    return int(done.group(1)), float(tps.group(1))


def _connection(database_url: str) -> list[str]:
    url = sa.make_url(database_url)
    args = ["-h", url.host or "127.0.0.1", "-p", str(url.port or 5432)]
    if url.username:
        args += ["-U", url.username]
    return [*args, url.database or "postgres"]


async def run(database_url: str, job: Run) -> float:
    """Run ``job``; transactions per second, as pgbench measured them."""
    with tempfile.TemporaryDirectory(prefix="tidings-pgbench-") as scratch:
        script = Path(scratch) / "transaction.sql"
        script.write_text(job.script)
        # -n: no VACUUM of pgbench's own tables (there are none); -j: one thread per CPU.
        args = ["-n", "-f", str(script), "-c", str(job.clients), "-t", str(job.per_client)]
        args += ["-j", str(min(2, job.clients)), "-M", "prepared" if job.prepared else "simple"]
        process = await asyncio.create_subprocess_exec(
            PGBENCH,
            *args,
            *_connection(database_url),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await process.communicate()
    output = out.decode(errors="replace")
    done, tps = parse(output)
    if process.returncode != 0 or done != job.transactions:
        raise RuntimeError(f"pgbench failed ({process.returncode}):\n{output[-2000:]}")
    return tps
