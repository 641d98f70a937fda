"""GET /v1/campaigns/{id}/report and GET /v1/types/{name}/report: what became of what was
sent, from counters the dispatchers keep (docs/events.md, Reports)."""

from __future__ import annotations

import re
import uuid
from datetime import date, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from tidings.api.auth import Scope, caller_of, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import (
    ClickCounts,
    ErrorResponse,
    OpenCounts,
    Report,
    ReportRates,
    SkippedCounts,
)
from tidings.clock import utcnow
from tidings.refusal import Refusal
from tidings.services import reports

router = APIRouter(prefix="/v1", tags=["reports"])
MAX_DAYS = 366
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}


def report(counts: dict[str, int]) -> Report:
    def n(name: str) -> int:
        return counts.get(name, 0)

    sent = n("sent")

    def rate(value: int) -> float | None:
        return round(value / sent, 4) if sent else None

    reasons = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("skipped:")}
    return Report(
        sent=sent,
        delivered=n("delivered"),
        bounced=n("bounced"),
        complained=n("complained"),
        unsubscribed=n("unsubscribed"),
        failed=n("failed"),
        expired=n("expired"),
        cancelled=n("cancelled"),
        skipped=SkippedCounts(total=n("skipped"), by_reason=reasons),
        opened=OpenCounts(
            total=n("opened"), unique=n("opened_unique"), unique_human=n("opened_human_unique")
        ),
        clicked=ClickCounts(total=n("clicked"), unique=n("clicked_unique")),
        rates=ReportRates(
            delivered=rate(n("delivered")),
            bounced=rate(n("bounced")),
            complained=rate(n("complained")),
            unsubscribed=rate(n("unsubscribed")),
            opened=rate(n("opened_human_unique")),
            clicked=rate(n("clicked_unique")),
        ),
    )


@router.get(
    "/campaigns/{campaign_id}/report",
    response_model=Report,
    responses=_NOT_FOUND,
    dependencies=needs(Scope.CAMPAIGNS),
)
async def campaign_report(request: Request, campaign_id: uuid.UUID) -> Any:
    """The campaign's sends, deliveries, bounces, complaints, opens, clicks, unsubscribes,
    failures and skips (by reason), with rates; up to date within a second or two."""
    namespace = caller_of(request).namespace
    counts = await reports.of_campaign(service_of(request).db, namespace, campaign_id)
    if counts is None:
        return error_response(404, "not_found", f"no campaign {campaign_id}", "campaignId")
    return report(counts)


def _day(text: str | None, field: str) -> date | None:
    """A UTC day written YYYY-MM-DD (no other form: "0" is not a day)."""
    if text is None:
        return None
    if not DAY.fullmatch(text):
        raise Refusal("invalid_request", f"{field}: a day, YYYY-MM-DD", field)
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise Refusal("invalid_request", f"{field}: no such day", field) from None


@router.get(
    "/types/{name}/report",
    response_model=Report,
    responses={**_NOT_FOUND, 422: {"model": ErrorResponse}},
    dependencies=needs(Scope.READ),
)
async def type_report(
    request: Request,
    name: str,
    start: Annotated[
        str | None, Query(alias="from", max_length=10, description="YYYY-MM-DD")
    ] = None,
    end: Annotated[str | None, Query(alias="to", max_length=10, description="YYYY-MM-DD")] = None,
) -> Any:
    """The type's report over the UTC days ``from`` to ``to`` (both included; by default
    the last 30 days), in the caller's namespace."""
    last = _day(end, "to") or utcnow().date()
    first = _day(start, "from") or last - timedelta(days=29)
    if first > last:
        raise Refusal("invalid_request", "from must not be after to", "from")
    if (last - first).days >= MAX_DAYS:
        raise Refusal("invalid_request", f"at most {MAX_DAYS} days per report", "to")
    namespace = caller_of(request).namespace
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    counts = await reports.of_type(service_of(request).db, namespace, name, days)
    if counts is None:
        return error_response(404, "not_found", f"no notification type {name}", "name")
    return report(counts)
