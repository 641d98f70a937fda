"""The dispatchers' reports (store/provider_state.py): one typed reader, and one window after
which a dispatcher that stopped reporting is gone, for breaker sharing, the dispatchers'
shares of a rate and the Kafka lanes' partitions alike."""

from __future__ import annotations

from datetime import timedelta

from tidings.clock import utcnow
from tidings.service import Service
from tidings.store import provider_state
from tidings.store.provider_state import LIVE_SECONDS, REPORT_SECONDS, ProviderReport

LANES = [{"priority": "low", "transport": "kafka", "channels": ["email"]}]


async def test_reports_are_typed_rows_read_back_as_written(service: Service) -> None:
    now = utcnow()
    state = {"state": "open", "retryInSeconds": 3.5, "lanes": LANES}
    await provider_state.report(service.db, "d1", {"sendgrid": state, "ses": {}}, now)
    found = await provider_state.reports(service.db, now - timedelta(seconds=1))
    assert [type(row) for row in found] == [ProviderReport, ProviderReport]
    assert [(row.account, row.dispatcher) for row in found] == [("sendgrid", "d1"), ("ses", "d1")]
    assert found[0].state == state
    assert abs((found[0].updated_at - now).total_seconds()) < 0.001


async def test_a_dispatcher_silent_for_three_reports_is_gone(service: Service) -> None:
    assert LIVE_SECONDS == 3 * REPORT_SECONDS
    now = utcnow()
    alive = now - timedelta(seconds=LIVE_SECONDS - 0.5)
    gone = now - timedelta(seconds=LIVE_SECONDS + 0.5)
    await provider_state.report(service.db, "alive", {"sendgrid": {}}, alive)
    await provider_state.report(service.db, "gone", {"sendgrid": {}}, gone)
    since = provider_state.live_since(now)
    live = await provider_state.reports(service.db, since)
    assert [row.dispatcher for row in live] == ["alive"]
    assert await provider_state.live_dispatchers(service.db, since) == 1
