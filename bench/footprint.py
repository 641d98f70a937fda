"""Peak resident memory per process at the benchmark's loads (issue 14: under 200 MB).

``tidings api`` is read once the accept rows are done. The dispatcher is run once more per
provider, after the measured rounds, as a ``tidings dispatch`` subprocess with the rows'
settings, so that its peak is its own (the measured rounds run it in the bench process).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench import dispatch, simulated, suite
from bench.memory import Reading, peak_rss_mb
from bench.workload import items
from tidings.providers.kinds import NoopAccount
from tidings.settings import Settings


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _dispatch_process(
    r: suite.Resources, what: str, settings: Settings, count: int, log: Path
) -> Reading:
    await suite.pending(r.pool, items(count, "footprint"))
    await simulated.forget(r.sim_url)
    env = simulated.dispatch_env(settings)
    seconds, peak = await dispatch.run_dispatch_process(r.config.database_url, env, r.pool, log)
    rate = f"{count / seconds:,.0f} deliveries/s, its start-up included"
    _say(f"memory: tidings dispatch, {what}: {peak} MB, {rate}")
    when = f"{count:,} deliveries, {what} ({rate})"
    return Reading("`tidings dispatch`", when, peak)


async def readings(r: suite.Resources, api_pid: int, scratch: Path) -> list[Reading]:
    """The API's peak so far, then one dispatcher subprocess per provider, then this
    process's own peak (for comparison: it ran the in-process dispatcher and the clients)."""
    c = r.config
    api = Reading(
        "`tidings api`",
        f"the accept rows ({c.singles:,} single and {c.batched:,} batched notifications per run)",
        peak_rss_mb(api_pid),
    )
    noop = dispatch.dispatch_settings(c.database_url, c.claim_batch, c.lane_concurrency)
    noop = noop.model_copy(
        update={
            "accounts": {"noop": NoopAccount()},
            "providers": {**noop.providers, "email": ["noop"]},
        }
    )
    sendgrid = simulated.sendgrid_settings(
        dispatch.dispatch_settings(c.database_url, c.claim_batch, c.sim_lane_concurrency),
        r.sim_url,
        c.sim_lane_concurrency,
    )
    lanes = f"lane concurrency {c.lane_concurrency}"
    sim_lanes = f"lane concurrency {c.sim_lane_concurrency}"
    return [
        api,
        await _dispatch_process(
            r, f"no-op provider, {lanes}", noop, c.deliveries, scratch / "noop.log"
        ),
        await _dispatch_process(
            r,
            f"simulated SendGrid, {sim_lanes}",
            sendgrid,
            c.sim_deliveries,
            scratch / "sendgrid.log",
        ),
        Reading(
            "the bench process",
            "everything (HTTP clients, in-process dispatcher, asyncpg baselines, items)",
            peak_rss_mb(),
            judged=False,  # not a tidings process: the bench's own clients and data
        ),
    ]
