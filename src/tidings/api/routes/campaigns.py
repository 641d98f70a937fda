"""Campaigns: POST /v1/campaigns (and its dry run), GET one, GET the list, POST .../cancel,
POST .../resume."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse

from tidings.api import cursors
from tidings.api.auth import Scope, caller_of, needs
from tidings.api.campaign_schemas import (
    CampaignAccepted,
    CampaignIn,
    CampaignList,
    CampaignOut,
    CampaignSummary,
    CancelOut,
    ChannelForecast,
    DryRunOut,
    HistogramBucket,
)
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.campaigns.create import CampaignRequest, Registry, checked_row, create
from tidings.campaigns.dry_run import SendTimeRules, dry_run, estimated_seconds
from tidings.campaigns.errors import CampaignError
from tidings.campaigns.planning import spread_seconds
from tidings.campaigns.progress import cancel, progress
from tidings.campaigns.reads import Campaign, newest, of_namespace, resume
from tidings.clock import utcnow
from tidings.intake.requests import IdempotencyKey
from tidings.priorities import Priority
from tidings.service import Service

router = APIRouter(prefix="/v1/campaigns", tags=["campaigns"], dependencies=needs(Scope.CAMPAIGNS))
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 409, 413, 422)
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (404, 422)
}


def _registry(service: Service) -> Registry:
    settings = service.settings
    return Registry(
        service.db,
        service.types,
        service.templates,
        settings.max_data_bytes,
        settings.send_at_tolerance,
    )


def _request(body: CampaignIn) -> CampaignRequest:
    return CampaignRequest(
        type=body.type,
        audience=body.audience.normalised(),
        name=body.name,
        data=body.data,
        channels=[c.value for c in body.channels] if body.channels else None,
        priority=body.priority.value if body.priority else None,
        send_at=body.send_at,
        spread_seconds=body.spread_seconds(),
        local_time=body.local_time,
        timezone=body.timezone,
    )


@router.post(
    "",
    status_code=202,
    response_model=CampaignAccepted | DryRunOut,
    responses={**_ERRORS, 200: {"model": DryRunOut, "description": "the dry run's forecast"}},
)
async def create_campaign(
    request: Request,
    body: CampaignIn,
    idempotency_key: Annotated[
        IdempotencyKey | None,
        Header(alias="Idempotency-Key", description="required unless dryRun=true"),
    ] = None,
    dry_run: Annotated[bool, Query(alias="dryRun")] = False,
) -> Any:
    """Schedule a campaign (202), or with ``dryRun=true`` forecast it (200, nothing stored)."""
    service = service_of(request)
    namespace = caller_of(request).namespace
    if dry_run:
        return await _forecast(service, _request(body), namespace, idempotency_key or "dry-run")
    if idempotency_key is None:
        raise CampaignError(
            "invalid_request",
            "the Idempotency-Key header is required: the same key makes a retried request safe",
            "Idempotency-Key",
        )
    campaign, _created = await create(
        _registry(service), _request(body), namespace, idempotency_key, utcnow()
    )
    return JSONResponse(
        {"campaignId": str(campaign.id), "status": campaign.status}, status_code=202
    )


async def _forecast(
    service: Service, body: CampaignRequest, namespace: str, key: str
) -> JSONResponse:
    settings = service.settings
    row = await checked_row(_registry(service), body, namespace, key, utcnow())
    campaign = Campaign(
        **{
            **row,
            "expander": None,
            "lease_until": None,
            "started_at": None,
            "expanded_at": None,
            "finished_at": None,
        }
    )
    kind = (await service.types.get({campaign.type}))[campaign.type]
    rules = SendTimeRules(settings.frequency_caps, settings.quiet_hours_jitter)
    forecast = await dry_run(service.db, campaign, kind, settings.campaigns, rules)
    share = settings.rate_limits.shares[Priority(campaign.priority)]
    window = spread_seconds(campaign, settings.campaigns.due_spread_seconds)
    channels = [
        ChannelForecast(
            channel=channel,
            deliveries=plan.deliveries,
            would_send=plan.would_send,
            skipped=dict(plan.skipped),
            deferred_by_quiet_hours=plan.deferred_by_quiet_hours,
            estimated_seconds=estimated_seconds(plan, _rate(service, channel), share, window),
        )
        for channel, plan in forecast.channels.items()
    ]
    width, buckets = forecast.histogram()
    answer = DryRunOut(
        audience_size=forecast.audience_size,
        channels=channels,
        bucket_seconds=width,
        histogram=[HistogramBucket(start=start, count=count) for start, count in buckets],
    )
    return JSONResponse(answer.model_dump(mode="json", by_alias=True), status_code=200)


def _rate(service: Service, channel: str) -> float | None:
    """The rate of the channel's primary account (None: no limit of ours)."""
    primary = service.settings.chain(channel)[0]
    account = service.settings.accounts.get(primary)
    return account.rate_per_second if account else None


@router.get("/{campaign_id}", response_model=CampaignOut, responses=_NOT_FOUND)
async def get_campaign(request: Request, campaign_id: uuid.UUID) -> Any:
    """Status, audience size, expanded so far, deliveries by status, percent done, ETA."""
    db = service_of(request).db
    campaign = await _campaign(request, campaign_id)
    if campaign is None:
        return _not_found(campaign_id)
    found = await progress(db, campaign, utcnow())
    return CampaignOut(
        campaign_id=campaign.id,
        name=campaign.name,
        type=campaign.type,
        status=campaign.status,
        priority=campaign.priority,
        channels=list(campaign.channels),
        audience=_shown_audience(campaign),
        send_at=campaign.send_at,
        spread_seconds=campaign.spread_seconds,
        local_time=campaign.local_time,
        audience_size=campaign.audience_size,
        expanded=campaign.expanded,
        deliveries=campaign.deliveries,
        by_status=found.by_status,
        skipped_by_reason=found.skipped_by_reason,
        percent_done=found.percent_done,
        estimated_finish=found.estimated_finish,
        created_at=campaign.created_at,
        started_at=campaign.started_at,
        finished_at=campaign.finished_at,
        paused_reason=campaign.paused_reason,
        paused_at=campaign.paused_at,
    )


def _shown_audience(campaign: Campaign) -> dict[str, Any]:
    """An inline list is shown by its size: 10,000 ids would swamp every status poll."""
    audience = dict(campaign.audience)
    if "userIds" in audience:
        return {"userIds": len(audience["userIds"])}
    return audience


async def _campaign(request: Request, campaign_id: uuid.UUID) -> Campaign | None:
    """The campaign, if it is the caller's namespace's."""
    return await of_namespace(service_of(request).db, caller_of(request).namespace, campaign_id)


def _not_found(campaign_id: uuid.UUID) -> JSONResponse:
    return error_response(404, "not_found", f"no campaign {campaign_id}", "campaignId")


@router.get("", response_model=CampaignList, responses={422: {"model": ErrorResponse}})
async def list_campaigns(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    after: Annotated[str | None, Query(max_length=200)] = None,
) -> Any:
    """Campaigns, newest first; ``next`` is the ``after`` of the following page."""
    service = service_of(request)
    before = _cursor(after) if after else None
    found = await newest(service.db, caller_of(request).namespace, limit + 1, before)
    page = found[:limit]
    following = _next_cursor(page[-1]) if len(found) > limit else None
    return CampaignList(campaigns=[_summary(c) for c in page], next=following)


def _summary(c: Campaign) -> CampaignSummary:
    return CampaignSummary(
        campaign_id=c.id,
        name=c.name,
        type=c.type,
        status=c.status,
        send_at=c.send_at,
        audience_size=c.audience_size,
        expanded=c.expanded,
        deliveries=c.deliveries,
        created_at=c.created_at,
    )


def _next_cursor(c: Campaign) -> str:
    return cursors.encode(c.created_at.isoformat(), str(c.id), separator="|", padded=True)


def _cursor(text: str) -> tuple[datetime, uuid.UUID]:
    created, campaign_id = cursors.decode(text, 2, separator="|")
    return cursors.moment(created), cursors.identifier(campaign_id)


@router.post("/{campaign_id}/cancel", response_model=CancelOut, responses=_NOT_FOUND)
async def cancel_campaign(request: Request, campaign_id: uuid.UUID) -> Any:
    """Stop the campaign: nothing more of it is sent after this answers. Its counts: sent,
    cancelled, skipped, failed, expired (and any still in progress). Repeating it, or
    cancelling a finished campaign, answers the same counts."""
    service = service_of(request)
    if await _campaign(request, campaign_id) is None:
        return _not_found(campaign_id)
    wait = service.settings.campaigns.cancel_wait_seconds
    counts = await cancel(service.db, campaign_id, utcnow(), wait)
    if counts is None:
        return _not_found(campaign_id)
    return CancelOut(campaign_id=campaign_id, **asdict(counts))


@router.post("/{campaign_id}/resume", response_model=CampaignOut, responses=_NOT_FOUND)
async def resume_campaign(request: Request, campaign_id: uuid.UUID) -> Any:
    """Continue a campaign its reputation guard PAUSED: its held deliveries are due now, and
    the guard judges only the sends after the pause. Any other campaign is answered as it
    is (resuming twice is harmless). Answers the campaign, as GET does."""
    service = service_of(request)
    if await _campaign(request, campaign_id) is None:
        return _not_found(campaign_id)
    resumed = await resume(service.db, campaign_id, utcnow())
    if resumed is None:
        return _not_found(campaign_id)
    service.wakeup.notify(Priority(resumed.priority))  # its deliveries are due now
    return await get_campaign(request, campaign_id)
