"""POST /v1/notifications, POST /v1/notifications/batch, GET /v1/notifications (the
search), GET /v1/notifications/{id}."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Annotated, Any

import pydantic_core
from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from tidings.api import cursors
from tidings.api.auth import Scope, caller_of, keyring_of, needs
from tidings.api.deps import request_id_of, service_of
from tidings.api.errors import error_response, field_name, validation_message
from tidings.api.masking import mask_address
from tidings.api.schemas import (
    BatchEnvelope,
    BatchIn,
    BatchResult,
    DeliveryOut,
    Engagement,
    ErrorResponse,
    FoundDeliveryOut,
    FoundNotificationOut,
    HistoryEntry,
    Moment,
    NotificationAccepted,
    NotificationOut,
    NotificationPage,
    StepOut,
)
from tidings.api.text_guard import bad_text_path, may_hold_bad_text
from tidings.group_commit import GroupCommit
from tidings.intake.accept import ItemResult, Submission, accept
from tidings.intake.drafts import ItemError
from tidings.intake.requests import BatchItemIn, IdempotencyKey, NotificationIn
from tidings.priorities import Channel
from tidings.refusal import Refusal
from tidings.services import notifications, workflows
from tidings.services.notifications import (
    Accepted,
    DeliveryRecord,
    FoundNotification,
    KeyConflict,
    Search,
    SearchPage,
)
from tidings.states import Status

router = APIRouter(prefix="/v1/notifications", tags=["notifications"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 409, 413, 422)
}


def _conflict_error(result: KeyConflict) -> ItemError:
    return ItemError(
        "idempotency_key_reused",
        f"Idempotency-Key {result.idempotency_key!r} was already used with a different "
        f"request body (notification {result.notification_id}); use a new key for a new "
        "notification",
        "Idempotency-Key",
        status_code=409,
    )


# Answers are built as plain JSON (shaped as NotificationAccepted and BatchResult, which
# document them): validating 1,000 response models per batch cost a tenth of its time.
def _accepted_json(result: Accepted) -> dict[str, Any]:
    deliveries = [{"id": d.id, "channel": d.channel, "status": d.status} for d in result.deliveries]
    notification_id = result.notification_id
    # notificationId: the same id, under the name producers written to the design expect.
    return {
        "id": notification_id,
        "notificationId": notification_id,
        "status": "accepted",
        "deliveries": deliveries,
    }


def _json(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    # pydantic's serializer: UUIDs as they are, and several times faster than json.dumps.
    body = pydantic_core.to_json(content)
    return Response(body, status_code, headers, media_type="application/json")


# The hottest route reads its header and body itself, documented as FastAPI would have
# (see openapi.py): pydantic parses the JSON straight into the model, where FastAPI parsed
# it to a dict first and then validated it, and resolved a dependency per parameter.
_SINGLE: dict[str, Any] = {
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": True,
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": 255,
                "title": "Idempotency-Key",
            },
        }
    ],
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/NotificationIn"}}
        },
    },
}
_idempotency_key = TypeAdapter(IdempotencyKey)


@router.post(
    "",
    status_code=202,
    response_model=NotificationAccepted,
    responses=_ERRORS,
    openapi_extra=_SINGLE,
    dependencies=needs(Scope.SEND),
)
async def create_notification(request: Request) -> Any:
    """Accept one notification. 202 means it is committed: it will not be lost."""
    idempotency_key, body = _single(request.headers.get("idempotency-key"), await request.body())
    caller = caller_of(request)
    keyring_of(request).admit(caller, 1)
    group_commit: GroupCommit[Submission, ItemResult] = request.app.state.group_commit
    submission = Submission(idempotency_key, body, caller.namespace, request_id_of(request))
    [result] = await group_commit.submit([submission])
    if isinstance(result, ItemError):
        raise result
    if isinstance(result, KeyConflict):
        raise _conflict_error(result)
    headers = {"Idempotent-Replayed": "true"} if result.replayed else None
    return _json(_accepted_json(result), 202, headers)


def _single(header: str | None, body: bytes) -> tuple[str, NotificationIn]:
    """The key and the notification, or every problem with them at once, as FastAPI's
    own validation reports them (``errors.py`` turns them into the 4xx)."""
    problems: list[Any] = []
    try:
        key = _idempotency_key.validate_python(header)
    except ValidationError as exc:
        problems += _located(exc, "header", "Idempotency-Key", missing=header is None)
    try:
        notification = NotificationIn.model_validate_json(body)
    except ValidationError as exc:
        problems += _located(exc, "body", missing=not body)
    if problems:
        raise RequestValidationError(problems)
    return key, notification


def _located(exc: ValidationError, *where: str, missing: bool) -> list[dict[str, Any]]:
    if missing:
        return [{"type": "missing", "loc": where, "msg": "Field required", "input": None}]
    return [{**error, "loc": (*where, *error["loc"])} for error in exc.errors()]


_batch_item = TypeAdapter(BatchItemIn)

# The body is read here from the raw bytes, and documented from BatchIn (see app.py):
# pydantic parses JSON straight into the models, where json.loads, FastAPI's validation of
# the envelope and then the items' took a quarter of a batch's time.
_BATCH_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/BatchIn"}}},
    }
}


@router.post(
    "/batch",
    response_model=BatchResult,
    responses=_ERRORS,
    openapi_extra=_BATCH_BODY,
    dependencies=needs(Scope.SEND),
)
async def create_batch(request: Request) -> Any:
    """Accept up to 1,000 notifications in one transaction; a result per item, in order."""
    parsed = _parse_batch(await request.body())
    caller = caller_of(request)
    keyring_of(request).admit(caller, len(parsed))
    request_id = request_id_of(request)
    valid = [
        Submission(i.idempotency_key, i, caller.namespace, request_id)
        for i in parsed
        if isinstance(i, BatchItemIn)
    ]
    accepted = iter(await accept(service_of(request), valid) if valid else [])
    results = [
        _batch_result(index, next(accepted) if isinstance(item, BatchItemIn) else item)
        for index, item in enumerate(parsed)
    ]
    return _json({"results": results})


def _parse_batch(body: bytes) -> list[BatchItemIn | ItemError]:
    """Every item in one pass; item by item only to say which ones are bad (or when text no
    database stores may be in it: each such item gets its own error)."""
    if not may_hold_bad_text(body):
        try:
            return list(BatchIn.model_validate_json(body).notifications)
        except ValidationError:
            pass
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's stack
        raise ItemError(
            "invalid_request", "the request body is not valid JSON (or nested too deep)", None, 400
        ) from None
    try:
        envelope = BatchEnvelope.model_validate(document)
    except ValidationError as exc:
        raise _item_error(exc) from None
    return [_parse_item(item) for item in envelope.notifications]


def _item_error(exc: ValidationError) -> ItemError:
    first = exc.errors()[0]
    return ItemError(
        "invalid_request", validation_message(dict(first)), field_name(first.get("loc", ()))
    )


def _parse_item(raw: dict[str, Any]) -> BatchItemIn | ItemError:
    bad = bad_text_path(raw)
    if bad is not None:
        return ItemError(
            "invalid_text",
            f"{bad or 'the item'} contains NUL or a lone UTF-16 surrogate",
            bad or None,
        )
    try:
        return _batch_item.validate_python(raw)
    except ValidationError as exc:
        return _item_error(exc)


def _batch_result(index: int, result: ItemResult) -> dict[str, Any]:
    if isinstance(result, KeyConflict):
        result = _conflict_error(result)
    if isinstance(result, ItemError):
        error = {"code": result.code, "message": result.message, "field": result.field}
        return {"index": index, "status": "error", "error": error}
    return {"index": index, **_accepted_json(result)}


def _moment(value: datetime | None, field: str) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise Refusal("invalid_request", f"{field}: give a time zone (Z or +hh:mm)", field)
    return value


def search_of(
    namespace: str,
    limit: int,
    *,
    user_id: str | None = None,
    type: str | None = None,
    status: Status | None = None,
    channel: Channel | None = None,
    campaign_id: uuid.UUID | None = None,
    address: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    after: str | None = None,
) -> Search:
    """The search the parameters ask for (the API's and the dashboard's); a Refusal
    naming the parameter when they contradict each other."""
    start, end = _moment(start, "from"), _moment(end, "to")
    if start is not None and end is not None and end <= start:
        raise Refusal("invalid_request", "to: must be after from", "to")
    return Search(
        namespace=namespace,
        limit=limit,
        user_id=user_id,
        type=type,
        campaign_id=campaign_id,
        status=status.value if status else None,
        channel=channel.value if channel else None,
        address=address,
        start=start,
        end=end,
        before=cursors.identifier(cursors.decode(after, 1)[0]) if after else None,
    )


def next_cursor(page: SearchPage) -> str | None:
    return cursors.encode(str(page.notifications[-1].id)) if page.more else None


@router.get(
    "",
    response_model=NotificationPage,
    responses={422: {"model": ErrorResponse}},
    dependencies=needs(Scope.READ),
)
async def search_notifications(
    request: Request,
    user_id: Annotated[str | None, Query(alias="userId", min_length=1, max_length=255)] = None,
    type: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    status: Annotated[Status | None, Query()] = None,
    channel: Annotated[Channel | None, Query()] = None,
    campaign_id: Annotated[uuid.UUID | None, Query(alias="campaignId")] = None,
    address: Annotated[str | None, Query(min_length=1, max_length=2048)] = None,
    start: Annotated[Moment | None, Query(alias="from")] = None,
    end: Annotated[Moment | None, Query(alias="to")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    after: Annotated[str | None, Query(max_length=100)] = None,
) -> Any:
    """The namespace's notifications, newest first, each with its deliveries (addresses
    masked). ``address`` is matched exactly as it was sent to (and never shown unmasked);
    ``status``, ``channel`` and ``address`` match a notification with such a delivery;
    ``from`` is included, ``to`` excluded. ``next`` is the cursor of the next page."""
    search = search_of(
        caller_of(request).namespace,
        limit,
        user_id=user_id,
        type=type,
        status=status,
        channel=channel,
        campaign_id=campaign_id,
        address=address,
        start=start,
        end=end,
        after=after,
    )
    page = await notifications.search_notifications(service_of(request).db, search)
    return NotificationPage(
        notifications=[found_out(found) for found in page.notifications],
        next=next_cursor(page),
    )


def found_out(found: FoundNotification) -> FoundNotificationOut:
    return FoundNotificationOut(
        id=found.id,
        type=found.type,
        category=found.category,
        priority=found.priority,
        user_id=found.user_id,
        campaign_id=found.campaign_id,
        send_at=found.send_at,
        created_at=found.created_at,
        deliveries=[
            FoundDeliveryOut(
                id=d.id,
                channel=d.channel,
                address=mask_address(d.channel, d.address),
                status=d.status,
                attempts=d.attempts,
                failure_kind=d.failure_kind,
                skip_reason=d.skip_reason,
                provider=d.provider,
                sent_at=d.sent_at,
                updated_at=d.updated_at,
            )
            for d in found.deliveries
        ],
    )


@router.get(
    "/{notification_id}",
    response_model=NotificationOut,
    responses={404: {"model": ErrorResponse}},
    dependencies=needs(Scope.READ),
)
async def get_notification(request: Request, notification_id: uuid.UUID) -> Any:
    """A notification with each delivery's status, attempts, errors and history."""
    namespace = caller_of(request).namespace
    found = await notifications.get_notification(service_of(request).db, notification_id, namespace)
    if found is None:
        return error_response(404, "not_found", f"no notification {notification_id}", "id")
    return NotificationOut(
        id=found.id,
        idempotency_key=found.idempotency_key,
        type=found.type,
        category=found.category,
        priority=found.priority,
        user_id=found.user_id,
        locale=found.locale,
        send_at=found.send_at,
        created_at=found.created_at,
        deliveries=[delivery_out(d) for d in found.deliveries],
        steps=[
            StepOut.model_validate(step, from_attributes=True)
            for step in await workflows.steps_of(service_of(request).db, found.id)
        ]
        or None,
    )


def delivery_out(row: DeliveryRecord) -> DeliveryOut:
    return DeliveryOut(
        id=row.id,
        channel=row.channel,
        address=mask_address(row.channel, row.address),
        status=row.status,
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at if row.status == "PENDING" else None,
        last_error=row.last_error,
        failure_kind=row.failure_kind,
        skip_reason=row.skip_reason,
        provider=row.provider,
        provider_message_id=row.provider_msg_id,
        template_version=row.template_version,
        created_at=row.created_at,
        sent_at=row.sent_at,
        updated_at=row.updated_at,
        history=history_of(row),
        engagement=(
            Engagement.model_validate(notifications.engagement(row.events), from_attributes=True)
            if row.channel == "email"
            else None
        ),
    )


def history_of(row: DeliveryRecord) -> list[HistoryEntry]:
    """The row's own timestamps (the happy path writes no events) merged with its events."""
    entries = [HistoryEntry(kind="accepted", at=row.created_at)]
    if row.status == "SKIPPED" and row.skip_reason:
        entries.append(
            HistoryEntry(kind="skipped", at=row.updated_at, detail={"reason": row.skip_reason})
        )
    entries += [HistoryEntry(kind=e.kind, at=e.at, detail=e.detail) for e in row.events]
    if row.sent_at is not None:
        entries.append(HistoryEntry(kind="sent", at=row.sent_at, detail={"provider": row.provider}))
    return sorted(entries, key=lambda entry: entry.at)
