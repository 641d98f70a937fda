"""The benchmark's pgbench baselines, memory readings and simulated-SendGrid settings
(bench/pgbench.py, bench/memory.py, bench/simulated.py, bench/report.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import asyncpg
import pytest
from bench import pgbench, report, simulated
from bench.memory import Reading, peak_rss_mb
from bench.workload import items

from tidings.settings import Settings

PGBENCH_REPORT = """\
transaction type: /tmp/transaction.sql
scaling factor: 1
query mode: prepared
number of clients: 32
number of threads: 2
maximum number of tries: 1
number of transactions per client: 63
number of transactions actually processed: 2016/2016
number of failed transactions: 0 (0.000%)
latency average = 7.012 ms
initial connection time = 41.123 ms
tps = 4563.917231 (without initial connection time)
"""


def test_pgbench_report_is_read() -> None:
    done, tps = pgbench.parse(PGBENCH_REPORT)
    assert done == 2016
    assert tps == pytest.approx(4563.917231)
    with pytest.raises(RuntimeError, match="cannot read"):
        pgbench.parse("connection to server failed")


def test_pgbench_counts_transactions_per_client() -> None:
    assert pgbench.plan(2_000, 32) == (32, 63)
    assert pgbench.plan(20, 2) == (2, 10)
    assert pgbench.plan(3, 32) == (3, 1)  # never more clients than transactions


@pytest.mark.skipif(shutil.which("pgbench") is None, reason="pgbench is not installed")
async def test_pgbench_scripts_insert_what_tidings_stores(pg_plain_database_url: str) -> None:
    """Each transaction of either script inserts, per notification, its key, itself and
    one PENDING delivery to the item's address, all with the same id (on plain tables, as
    bench.database makes them: the scripts' ids are random, of no day)."""
    pg_database_url = pg_plain_database_url
    await pgbench.run(pg_database_url, pgbench.Run(pgbench.single_script(), 2, 3, True))
    batch = items(5, "t")
    await pgbench.run(pg_database_url, pgbench.Run(pgbench.batch_script(batch), 2, 1, False))
    conn = await asyncpg.connect(pg_database_url)
    try:
        joined = await conn.fetch(
            "SELECT d.address, d.status, n.data FROM notification n "
            "JOIN idempotency_key k ON k.notification_id = n.id "
            "JOIN delivery d ON d.notification_id = n.id"
        )
    finally:
        await conn.close()
    assert len(joined) == 2 * 3 + 2 * 5
    assert {row["status"] for row in joined} == {"PENDING"}
    assert sum(row["address"] == "user4@example.com" for row in joined) == 2


@pytest.mark.skipif(shutil.which("pgbench") is None, reason="pgbench is not installed")
async def test_pgbench_dispatch_script_sends_every_due_delivery_once(
    pg_plain_database_url: str,
) -> None:
    """Claim-and-complete transactions of 4 rows take every due delivery to SENT, each one
    attempt, and a last transaction that finds none does nothing."""
    await pgbench.run(
        pg_plain_database_url, pgbench.Run(pgbench.batch_script(items(10, "d")), 1, 1, False)
    )
    await pgbench.run(pg_plain_database_url, pgbench.Run(pgbench.dispatch_script(4), 1, 4, True))
    conn = await asyncpg.connect(pg_plain_database_url)
    try:
        rows = await conn.fetch("SELECT status, attempts FROM delivery")
    finally:
        await conn.close()
    assert [(row["status"], row["attempts"]) for row in rows] == [("SENT", 1)] * 10


def test_peak_rss_of_this_process() -> None:
    peak = peak_rss_mb()
    if Path("/proc/self/status").exists():
        assert peak is not None and 10 < peak < 10_000
    assert peak_rss_mb(2**30) is None  # no such process


def test_memory_table_judges_200_mb() -> None:
    table = report.memory_table(
        [
            Reading("api", "load", 150.0),
            Reading("dispatch", "load", 250.0),
            Reading("x", "", None),
            Reading("bench", "all", 300.0, judged=False),
        ]
    )
    assert "| 150 MB | < 200 MB | pass |" in table
    assert "| 250 MB | < 200 MB | FAIL |" in table
    assert "not read" in table
    assert "| 300 MB | - | comparison only |" in table


def test_dispatch_subprocess_gets_the_sendgrid_account(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a `tidings dispatch` subprocess is given reads back as the same settings, the
    API key in clear."""
    lanes = {"normal": {"concurrency": 7}}
    base = Settings(database_url="postgresql://x@127.0.0.1/db", lanes=lanes)
    env = simulated.dispatch_env(simulated.sendgrid_settings(base, "http://127.0.0.1:1", 7))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    again = Settings(database_url=base.database_url)
    account = again.accounts[simulated.ACCOUNT]
    assert account.max_in_flight == 7
    assert account.api_key.get_secret_value() == simulated.SENDGRID_KEY  # type: ignore[union-attr]
    assert again.providers["email"] == [simulated.ACCOUNT]
    assert again.lanes.normal.concurrency == 7
