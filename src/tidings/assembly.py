"""The composition of a dispatcher: its parts built from the ``Service`` and wired together,
once, here, so that ``dispatch/`` takes its parts and never the whole service.

``tidings dispatch`` (direct lanes, expanding campaigns) and ``tidings worker`` (Kafka
lanes, a ``WorkerPlan``; the relays expand campaigns) differ only in the lanes built and
in the helpers they run."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Mapping

from tidings.background.retention import RetentionPlan
from tidings.campaigns.expander import Expander
from tidings.dispatch.dispatcher import Dispatcher
from tidings.dispatch.lanes.direct import DirectLane
from tidings.dispatch.lanes.kafka import KafkaLane, WorkerPlan
from tidings.dispatch.lanes.lane import Lane
from tidings.dispatch.pipeline.attempt import Composer, Sender
from tidings.dispatch.pipeline.inbox import InboxProvider, with_inbox
from tidings.dispatch.pipeline.outcomes import OutcomeWriter
from tidings.dispatch.pipeline.retry import RetryPolicy
from tidings.dispatch.pipeline.send_checks import SendTimeChecks
from tidings.dispatch.pipeline.send_starts import SendStarts
from tidings.dispatch.pipeline.sending import LaneContext
from tidings.dispatch.pipeline.types import TypeRulebook
from tidings.dispatch.protection.breaker_share import BreakerShare
from tidings.dispatch.protection.calls import ProtectedCalls
from tidings.dispatch.protection.coordination import Coordination
from tidings.dispatch.protection.guard_sync import GuardSync
from tidings.dispatch.protection.protection import Protection
from tidings.ids import new_id
from tidings.priorities import Channel, Priority
from tidings.providers.base import Provider
from tidings.providers.chains import ProviderSet
from tidings.service import Service
from tidings.store.campaigns import CancelledCampaigns


def assemble_dispatcher(
    service: Service,
    providers: ProviderSet | Mapping[Channel, Provider],
    rng: random.Random | None = None,
    worker: WorkerPlan | None = None,
) -> Dispatcher:
    """A dispatcher sending through ``providers``: direct lanes, or a Kafka worker's."""
    settings = service.settings
    if not isinstance(providers, ProviderSet):
        providers = ProviderSet.per_channel(providers)
    providers = with_inbox(providers, InboxProvider(service.db, service.inbox_wakeup.wake))
    rng = rng or random.Random()
    ident = f"{socket.gethostname()}:{os.getpid()}:{new_id().hex[-8:]}"
    coordination, protection = _protection(service, providers)
    writer = OutcomeWriter(service.db, settings.outcome_flush_interval)
    cancelled = CancelledCampaigns(service.db)
    context = _lane_context(service, providers, protection, coordination, writer, cancelled, rng)
    lanes: list[Lane]
    if worker is None:
        lanes = [DirectLane(p, settings.lanes.for_priority(p), context) for p in Priority]
    else:
        grace = settings.shutdown_grace
        lanes = [
            KafkaLane(p, settings.lanes.for_priority(p), context, worker, grace, ident)
            for p in worker.priorities
        ]
    return Dispatcher(
        id=ident,
        db=service.db,
        wakeup=service.wakeup,
        lanes=lanes,
        writer=writer,
        protection=protection,
        coordination=coordination,
        guard_sync=GuardSync(service.db, protection.guard, ident),
        breaker_share=BreakerShare(service.db, protection.breaker, ident),
        cancelled=cancelled,
        retention=RetentionPlan(
            settings.retention_days,
            settings.idempotency_days,
            settings.partitions_ahead,
            settings.inbox.retention_days,
        ),
        # A worker is woken by its topics; the relays expand campaigns.
        expander=None
        if worker is not None
        else Expander(service.db, service.types, service.wakeup, settings.campaigns, ident, rng),
        listens=worker is None and service.db.dialect.notifies,
        reaper_interval=settings.reaper_interval,
        shutdown_grace=settings.shutdown_grace,
    )


def _protection(service: Service, providers: ProviderSet) -> tuple[Coordination, Protection]:
    """Limits, breakers and guards, shared through Redis when it is configured."""
    settings = service.settings
    coordination = Coordination.connect(
        settings.redis_url,
        providers,
        settings.rate_limits,
        settings.lease_seconds,
        settings.provider_timeout,
    )
    protection = Protection.from_settings(
        providers,
        settings.breaker,
        settings.rate_limits,
        coordination.limiter,
        settings.deactivation_guard,
    )
    protection.slots = coordination.slots
    coordination.follow(protection.breaker)
    return coordination, protection


def _lane_context(
    service: Service,
    providers: ProviderSet,
    protection: Protection,
    coordination: Coordination,
    writer: OutcomeWriter,
    cancelled: CancelledCampaigns,
    rng: random.Random,
) -> LaneContext:
    """What every lane's send pipeline shares: the checks, the sender, the writer."""
    settings = service.settings
    types = TypeRulebook(service.types, RetryPolicy(**settings.retry.model_dump()))
    composer = Composer(
        service.templates,
        service.unsubscriber,
        settings.sms_max_segments,
        service.engagement,
        service.preference_links,
    )
    return LaneContext(
        db=service.db,
        providers=providers,
        writer=writer,
        types=types,
        wakeup=service.wakeup,
        lease_seconds=settings.lease_seconds,
        rng=rng,
        protection=protection,
        calls=ProtectedCalls(protection, service.db, rng),
        sender=Sender(composer, settings.provider_timeout, rng),
        checks=SendTimeChecks(
            service.db, types.rules, rng, settings.quiet_hours_jitter, settings.frequency_caps
        ),
        cancelled=cancelled,
        dedup=coordination.dedup,
        starts=SendStarts(service.db),
    )
