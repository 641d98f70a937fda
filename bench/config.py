"""What one benchmark run measures: sizes, concurrency, repetitions and the database."""

from __future__ import annotations

import os
from dataclasses import dataclass

import sqlalchemy as sa

DEFAULT_ADMIN_URL = os.environ.get(
    "TIDINGS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@dataclass(frozen=True)
class BenchConfig:
    """Sizes and knobs; the defaults are the full run, ``quick()`` the smoke run."""

    admin_url: str = DEFAULT_ADMIN_URL
    database: str = "tidings_bench"
    singles: int = 2_000  # notifications POSTed one per request
    concurrency: int = 32  # concurrent clients for single requests
    batched: int = 20_000  # notifications POSTed in batches
    batch_size: int = 1_000
    batch_concurrency: int = 2  # concurrent batch requests
    deliveries: int = 20_000  # PENDING deliveries the dispatcher sends
    claim_batch: int = 100  # the NORMAL lane's claim batch (and the baseline's)
    # The NORMAL lane's sends in flight: twice the claim batch, so that the next batch is
    # claimed while the one before is sent (with it equal to the batch, the lane waits for
    # every send of a batch before it claims again, and the database for the lane).
    lane_concurrency: int = 200
    # Dispatch through the simulator's SendGrid against the no-op provider, both at
    # sim_lane_concurrency: 50 ms per send needs rate x 0.05 s sends in flight to hide.
    sim_latency_ms: float = 50.0
    # 200: hides 50 ms up to 4,000 sends/s, several times what one process reaches through
    # httpx (docs/benchmarks.md, notes); more connections only cost memory.
    sim_lane_concurrency: int = 200
    # Fewer than `deliveries`: at the several hundred sends/s one process reaches through
    # httpx, 20,000 would take a minute per run.
    sim_deliveries: int = 4_000
    repeat: int = 5

    @classmethod
    def quick(cls) -> BenchConfig:
        """A smoke run: small sizes, one repetition."""
        return cls(singles=300, batched=3_000, deliveries=3_000, sim_deliveries=500, repeat=1)

    def url_for(self, database: str) -> str:
        return sa.make_url(self.admin_url).set(database=database).render_as_string(False)

    @property
    def database_url(self) -> str:
        """The scratch database, in the form tidings' settings take."""
        return self.url_for(self.database)
