"""GET /metrics (docs/operations.md, Metrics): the counters say what happened, the gauges
what the database holds, the dashboard queries only metrics that exist, and in
multiprocess mode one API process shows what a separate dispatcher process sent.

Counters live as long as the test process, so each test uses a type and a provider
account of its own and compares its own series; the few shared series (latency by
priority, deferrals) are compared before and after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import eventually, post, put_type, running_dispatcher
from tests.integration.test_api_keys import add_key, http
from tidings.api.app import create_app
from tidings.api.auth import Scope
from tidings.assembly import assemble_dispatcher
from tidings.clock import utcnow
from tidings.priorities import Channel
from tidings.providers.accounts import AccountSettings
from tidings.providers.chains import ProviderSet
from tidings.providers.testing import Script, ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana-dashboard.json"
FAST_RETRY = {"baseDelay": 0.01, "maxDelay": 0.02, "maxAttempts": 2}
TERMINAL = {"SENT", "FAILED", "SKIPPED", "EXPIRED", "CANCELLED"}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The shared test settings, with gauges read from the database at every scrape."""
    return settings.model_copy(update={"metrics_refresh_seconds": 0.0})


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    """The sum of ``metric``'s samples whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == metric and wanted <= found)


def email(kind: str, address: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "to": {"email": address}, **extra}


async def accept(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
    response = await post(client, body)
    assert response.status_code == 202, response.text
    found: str = response.json()["id"]
    return found


async def wait_settled(client: httpx.AsyncClient, ids: list[str], within: float = 15) -> None:
    async def settled() -> bool:
        for notification_id in ids:
            shown = (await client.get(f"/v1/notifications/{notification_id}")).json()
            if any(d["status"] not in TERMINAL for d in shown["deliveries"]):
                return False
        return True

    await eventually(settled, within=within, interval=0.05)


async def test_counters_and_gauges_say_what_happened(
    client: httpx.AsyncClient, service: Service
) -> None:
    kind, account = unique("metrics.mix."), unique("mix-")
    await put_type(client, kind, channels=("email",), retry=FAST_RETRY)
    await client.put("/v1/suppressions/email/gone@example.com")
    fine = [f"ok{n}@example.com" for n in range(4)]
    later = (utcnow() + timedelta(hours=1)).isoformat()
    ids = [
        await accept(client, email(kind, address))
        for address in [*fine, "bad@example.com", "flaky@example.com", "gone@example.com"]
    ]
    ids.append(await accept(client, email(kind, "late@example.com")))
    await accept(client, email(kind, "future@example.com", sendAt=later))

    before = await scrape(client)
    labels = {"type": kind, "channel": "email", "priority": "normal"}
    assert value(before, "tidings_notifications_accepted_total", type=kind) == 9
    assert value(before, "tidings_deliveries_accepted_total", **labels) == 9
    assert value(before, "tidings_deliveries_skipped_total", reason="suppressed", **labels) == 1
    normal = {"priority": "normal"}
    assert value(before, "tidings_queue_depth", state="due", **normal) == 7
    assert value(before, "tidings_queue_depth", state="scheduled", **normal) == 1
    assert 0 <= value(before, "tidings_queue_oldest_due_age_seconds", **normal) < 60
    assert value(before, "tidings_dead_letters") == 0

    # Suppressed after it was accepted: skipped by the send-time checks.
    await client.put("/v1/suppressions/email/late@example.com")
    scripts = {
        "bad@example.com": Script(permanent=True),
        "flaky@example.com": Script(transient_failures=99),
    }
    async with running_dispatcher(service, ScriptedProvider(account, scripts=scripts)):
        await wait_settled(client, ids)
        after = await scrape(client)

    sent = value(after, "tidings_deliveries_sent_total", provider=account, **labels)
    assert sent == 4
    failed = "tidings_deliveries_failed_total"
    assert value(after, failed, provider=account, kind="permanent", **labels) == 1
    assert value(after, failed, provider=account, kind="exhausted", **labels) == 1
    assert value(after, "tidings_deliveries_skipped_total", reason="suppressed", **labels) == 2
    calls = "tidings_provider_calls_total"
    assert value(after, calls, provider=account, channel="email", result="ok") == 4
    assert value(after, calls, provider=account, result="permanent") == 1
    assert value(after, calls, provider=account, result="transient") == 2  # maxAttempts 2
    timed = value(after, "tidings_provider_call_seconds_count", provider=account)
    assert timed == 7
    latency = "tidings_delivery_latency_seconds_count"
    assert value(after, latency, **normal) - value(before, latency, **normal) == 4
    assert value(after, "tidings_queue_depth", state="due", **normal) == 0
    assert value(after, "tidings_queue_depth", state="scheduled", **normal) == 1
    assert value(after, "tidings_queue_oldest_due_age_seconds", **normal) == 0
    # The dead-letter queue holds the exhausted one; a permanent failure is not listed.
    assert value(after, "tidings_dead_letters", kind="exhausted") == 1
    assert value(after, "tidings_dead_letters") == 1
    assert value(after, "tidings_breaker_state", account=account) == 0


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_breaker_state_and_deferrals_after_an_outage(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.breaker.consecutive_failures = 2
    service.settings.breaker.open_seconds = 60
    kind, account = unique("metrics.outage."), unique("outage-")
    await put_type(client, kind, channels=("email",), retry={"baseDelay": 0.01, "maxDelay": 0.02})
    before = await scrape(client)
    down = Script(transient_failures=99)
    provider = ScriptedProvider(account, scripts={f"down{n}@example.com": down for n in range(4)})
    async with running_dispatcher(service, provider):
        for n in range(4):
            await accept(client, email(kind, f"down{n}@example.com"))

        async def opened() -> Samples | None:
            samples = await scrape(client)
            return samples if value(samples, "tidings_breaker_state", account=account) else None

        after = await eventually(opened, within=8, interval=0.1)
    assert value(after, "tidings_breaker_state", account=account) == 2
    assert value(after, "tidings_provider_calls_total", provider=account, result="transient") >= 2
    deferred = "tidings_deliveries_deferred_total"
    where = {"channel": "email", "priority": "normal", "reason": "breaker_open"}
    assert value(after, deferred, **where) > value(before, deferred, **where)


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_rate_limit_waits_are_timed_per_account(
    client: httpx.AsyncClient, service: Service
) -> None:
    kind, account = unique("metrics.limited."), unique("limited-")
    await put_type(client, kind, channels=("email",))
    provider = ScriptedProvider(account)
    providers = ProviderSet(
        {account: provider},
        {channel.value: [account] for channel in Channel},
        {account: AccountSettings(kind="scripted", rate_per_second=8)},
    )
    ids = [await accept(client, email(kind, f"r{n}@example.com")) for n in range(5)]
    async with dispatching(service, providers):
        await wait_settled(client, ids)  # the 4th send waited for a token
        samples = await scrape(client)
    sent = "tidings_deliveries_sent_total"
    assert value(samples, sent, type=kind, provider=account) == 5
    waits = value(samples, "tidings_rate_limit_wait_seconds_count", account=account)
    waited = value(samples, "tidings_rate_limit_wait_seconds_sum", account=account)
    assert waits >= 1
    # Seconds (not milliseconds): well under a minute however slow the machine.
    assert 0 < waited < 60


@contextlib.asynccontextmanager
async def dispatching(service: Service, providers: ProviderSet) -> AsyncIterator[None]:
    """``running_dispatcher`` with accounts of its own (their rates)."""
    stop = asyncio.Event()
    task = asyncio.create_task(assemble_dispatcher(service, providers).run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_campaign_progress_gauges(client: httpx.AsyncClient, service: Service) -> None:
    kind = unique("metrics.campaign.")
    await put_type(client, kind, category="marketing", channels=("email",))
    users = [unique("user-") for _ in range(3)]
    for user in users:
        response = await client.put(f"/v1/users/{user}", json={"email": f"{user}@example.com"})
        assert response.status_code in (200, 201), response.text
    # Spread over a day: expanded at once, sent (almost surely) after the test.
    body = {"type": kind, "audience": {"userIds": users}, "spreadOver": "24h", "name": "m"}
    response = await client.post("/v1/campaigns", json=body, headers={"Idempotency-Key": kind})
    assert response.status_code == 202, response.text
    campaign = response.json()["campaignId"]
    waiting = await scrape(client)
    assert value(waiting, "tidings_campaign_audience_size", campaign=campaign) == -1
    assert value(waiting, "tidings_campaign_expanded_users", campaign=campaign) == 0
    async with running_dispatcher(service, ScriptedProvider(unique("campaign-"))):

        async def expanded() -> Samples | None:
            # The gauges are read by several queries: wait for a scrape that saw all of the
            # expansion (the queue read may run just before the page commits).
            samples = await scrape(client)
            done = value(samples, "tidings_campaign_expanded_users", campaign=campaign) == 3
            queued = sum(
                value(samples, "tidings_queue_depth", priority="low", state=s)
                for s in ("due", "scheduled")
            )
            return samples if done and queued == 3 else None

        samples = await eventually(expanded, within=10, interval=0.05)
    labels = {"campaign": campaign, "status": "SENDING"}
    assert value(samples, "tidings_campaign_audience_size", **labels) == 3
    assert value(samples, "tidings_campaign_deliveries", **labels) == 3
    low = [
        value(samples, "tidings_queue_depth", priority="low", state=s) for s in ("due", "scheduled")
    ]
    assert sum(low) == 3


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_metrics_need_a_metrics_key_and_show_no_campaign_name(service: Service) -> None:
    """Once keys exist, /metrics (every namespace's counts) is for a metrics key only; and a
    campaign's free-text name is in no label, whoever scrapes."""
    app = create_app(service)
    kind = unique("metrics.secret.")
    name = unique("Spring sale for VIP ")
    async with http(app) as client:
        await put_type(client, kind, category="marketing", channels=("email",))
        body = {"type": kind, "audience": {"userIds": ["u1"]}, "spreadOver": "24h", "name": name}
        answer = await client.post("/v1/campaigns", json=body, headers={"Idempotency-Key": kind})
        assert answer.status_code == 202, answer.text
        campaign = answer.json()["campaignId"]
        scraper = await add_key(app, "prometheus", [Scope.METRICS])
        sender = await add_key(app, "orders", [Scope.SEND, Scope.READ, Scope.ADMIN])
        anonymous = await client.get("/metrics")
        assert anonymous.status_code == 401
        assert name not in anonymous.text and kind not in anonymous.text
    async with http(app, sender) as client:
        assert (await client.get("/metrics")).status_code == 403
    async with http(app, scraper) as client:
        scraped = await client.get("/metrics")
    assert scraped.status_code == 200
    assert campaign in scraped.text
    assert name not in scraped.text


# Metric names in PromQL: a name followed by a selector, a range or an operator.
_METRIC = re.compile(r"\btidings_[a-z0-9_]+")
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def dashboard_expressions(dashboard: Mapping[str, Any]) -> list[str]:
    return [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_the_dashboard_queries_only_metrics_that_exist(client: httpx.AsyncClient) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = dashboard_expressions(dashboard)
    assert len(expressions) >= 12
    response = await client.get("/metrics")
    exposed = {
        family.name + suffix
        for family in text_string_to_metric_families(response.text)
        for suffix in _SUFFIXES.get(family.type, ("",))
    }
    used = {name for expr in expressions for name in _METRIC.findall(expr)}
    assert used - exposed == set()
    # Every metric tidings exposes has a panel.
    families = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in used}
    shown = {f.name for f in text_string_to_metric_families(response.text)}
    assert {n for n in shown if n.startswith("tidings_")} - families == set()
