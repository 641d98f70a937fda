"""GET /v1/inbound-replies: the SMS keyword replies received (STOP, START, HELP...), newest
first, with what each did; the text of a reply is never kept."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.masking import mask_address
from tidings.api.schemas import InboundReplyOut
from tidings.refusal import Refusal
from tidings.services import replies
from tidings.tracking.inbound import KEYWORDS

router = APIRouter(prefix="/v1", tags=["suppressions"], dependencies=needs(Scope.ADMIN))


@router.get("/inbound-replies", response_model=list[InboundReplyOut])
async def list_inbound_replies(
    request: Request,
    keyword: Annotated[str | None, Query(max_length=20)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    """Keyword replies to the SMS numbers (Twilio's inbound webhook), newest first."""
    if keyword is not None and keyword.upper() not in KEYWORDS:
        known = ", ".join(sorted(KEYWORDS))
        raise Refusal("invalid_request", f"keyword: one of {known}", "keyword")
    keyword = keyword.upper() if keyword else None
    rows = await replies.newest(service_of(request).db, limit, keyword)
    return [
        InboundReplyOut(
            account=row.account,
            sender=mask_address("sms", row.sender),
            keyword=row.keyword,
            action=row.action,
            at=row.at,
        )
        for row in rows
    ]
