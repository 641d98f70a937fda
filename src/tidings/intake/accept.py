"""The one intake path shared by single requests and batches: validate against the registry,
insert in one transaction, answer per item, wake the HIGH lane."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tidings.clock import utcnow
from tidings.content.catalog import TemplateCatalog
from tidings.content.locales import fallback_chain
from tidings.intake.drafts import IntakeContext, ItemError, build_draft, needs_devices, user_ids
from tidings.intake.observed import count_accepted
from tidings.intake.requests import NotificationIn
from tidings.policy.accept_time import skip_unwanted
from tidings.priorities import Channel
from tidings.service import Service
from tidings.states import Status
from tidings.store import intake as store_intake
from tidings.store import users
from tidings.store.db_errors import unstorable
from tidings.store.intake import AcceptResult, NotificationDraft
from tidings.workflows.planner import groups_by_user, plan
from tidings.workflows.shape import KeyNotRendered

log = logging.getLogger(__name__)

ItemResult = AcceptResult | ItemError


@dataclass(frozen=True, slots=True)
class Submission:
    """One notification as a caller submitted it: a group commit gathers several callers'
    submissions into one transaction, so each carries whose it is."""

    idempotency_key: str
    request: NotificationIn
    # The caller's API key namespace: idempotency keys are unique within it.
    namespace: str
    request_id: str | None = None


async def accept(service: Service, items: Sequence[Submission]) -> list[ItemResult]:
    """Accept ``items``; one result per item, in order."""
    context = await _context(service, [item.request for item in items])
    results: list[ItemResult | NotificationDraft] = []
    for item in items:
        try:
            draft = build_draft(item.request, item.idempotency_key, item.namespace, context)
            _check_workflow(item.request, context)
        except ItemError as error:
            results.append(error)
            continue
        draft.request_id = item.request_id
        results.append(draft)
    await _refuse_without_templates(service, results, context)
    drafts = [r for r in results if isinstance(r, NotificationDraft)]
    # Accept-time policy (docs/architecture.md, Policy check order), shared with campaigns.
    await skip_unwanted(service.db, drafts, lambda name: context.types[name].required)
    _plan_workflows(items, results, context)
    drafts = [r for r in results if isinstance(r, NotificationDraft)]
    stored = await _store(service, drafts, context.now) if drafts else []
    count_accepted(drafts, stored)  # metrics (intake/observed.py)
    answered = iter(stored)
    answers = [next(answered) if isinstance(r, NotificationDraft) else r for r in results]
    # Lanes in this process start at once; other processes hear HIGH through pg_notify.
    for priority in {d.priority for d in drafts if d.send_at is None}:
        service.wakeup.notify(priority)
    return answers


def _plan_workflows(
    items: Sequence[Submission],
    results: list[ItemResult | NotificationDraft],
    context: IntakeContext,
) -> None:
    """A workflow's steps, holding its deliveries; a digest key that does not render for
    the notification's data refuses it."""
    for index, (item, result) in enumerate(zip(items, results, strict=True)):
        if not isinstance(result, NotificationDraft):
            continue
        try:
            plan(result, context.types[result.type], item.request.cancel_key)
        except KeyNotRendered as error:
            results[index] = ItemError(
                "invalid_data", f"the type's workflow key does not render for data: {error}", "data"
            )


def _check_workflow(request: NotificationIn, context: IntakeContext) -> None:
    """A cancel key needs a workflow to cancel; a digest or throttle, a user."""
    kind = context.types[request.type]
    if kind.workflow is None and request.cancel_key is not None:
        raise ItemError(
            "invalid_request",
            f"cancelKey applies to a type with a workflow; {request.type!r} has none",
            "cancelKey",
        )
    if request.user_id is None and groups_by_user(kind):
        raise ItemError(
            "invalid_request",
            "a digest or throttle counts one user's notifications: give userId",
            "userId",
        )


async def _store(
    service: Service, drafts: Sequence[NotificationDraft], now: datetime
) -> list[ItemResult]:
    """Insert ``drafts`` in one transaction; when the database refuses a value, retry in
    halves so only the draft it cannot store gets an error and the others are accepted.
    (The API refuses such values first; this is the net for whatever it does not know.)"""
    try:
        return list(await store_intake.accept(service.db, drafts, now))
    except Exception as error:
        if not unstorable(error):
            raise
        if len(drafts) == 1:
            draft = drafts[0]
            log.warning(
                "unstorable notification: %s",
                type(error).__name__,
                extra={"request_id": draft.request_id, "notification_id": draft.id},
            )
            return [
                ItemError(
                    "unstorable",
                    "the database cannot store a value of this notification "
                    "(for example a NUL character or a number out of range)",
                )
            ]
    middle = len(drafts) // 2
    return [
        *await _store(service, drafts[:middle], now),
        *await _store(service, drafts[middle:], now),
    ]


async def _refuse_without_templates(
    service: Service, results: list[ItemResult | NotificationDraft], context: IntakeContext
) -> None:
    """A notification with a channel that no template can serve is refused (422 naming the
    channel): docs/architecture.md, Policy check order. One reload at most per request or batch."""
    catalog = service.templates
    await catalog.refresh_if_stale()
    # A batch's items share a few (type, locale, channels) shapes: judge each shape once.
    shapes = {
        index: _shape(result)
        for index, result in enumerate(results)
        if isinstance(result, NotificationDraft)
    }
    verdicts = {shape: _missing(shape, catalog, context) for shape in set(shapes.values())}
    if any(verdicts.values()):
        await catalog.reload()  # uploaded a moment ago, maybe through another process
        verdicts = {shape: _missing(shape, catalog, context) for shape in verdicts}
    for index, shape in shapes.items():
        refused = verdicts[shape]
        if refused is not None:
            results[index] = refused


Shape = tuple[str, str | None, tuple[str, ...]]


def _shape(draft: NotificationDraft) -> Shape:
    # Deliveries skipped already (no address) need no words.
    pending = (str(d.channel) for d in draft.deliveries if d.status is Status.PENDING)
    return draft.type, draft.locale, tuple(dict.fromkeys(pending))


def _missing(shape: Shape, catalog: TemplateCatalog, context: IntakeContext) -> ItemError | None:
    type_name, locale, channels = shape
    chain = fallback_chain(locale, context.types[type_name].default_locale)
    for channel in channels:
        if channel == Channel.WEBHOOK.value:
            continue  # without a template, a webhook sends the notification's data as is
        if catalog.find(type_name, channel, chain) is None:
            return ItemError(
                "no_template",
                f"no template can serve channel '{channel}' of type {type_name!r} "
                f"(locales tried: {', '.join(chain)})",
                "channels",
            )
    return None


async def _context(service: Service, items: Sequence[NotificationIn]) -> IntakeContext:
    settings = service.settings
    types = await service.types.get({item.type for item in items})
    profiles = await users.get_users(service.db, user_ids(items))
    device_users = {
        item.user_id for item in items if item.user_id and needs_devices(item, types.get(item.type))
    }
    tokens = await users.active_device_tokens(service.db, device_users)
    return IntakeContext(
        now=utcnow(),
        types=types,
        users=profiles,
        device_tokens=tokens,
        max_data_bytes=settings.max_data_bytes,
        send_at_tolerance=settings.send_at_tolerance,
        due_spread_seconds=settings.campaigns.due_spread_seconds,
    )
