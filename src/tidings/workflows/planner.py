"""At accept: a notification of a type with a workflow gets one row per step, its
deliveries (made and checked as for any notification) held by its send steps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime
from typing import Any

from tidings.states import Status
from tidings.store.intake import NotificationDraft
from tidings.store.types import NotificationType
from tidings.store.workflow_steps import StepDraft, WorkflowDraft
from tidings.workflows.shape import Digest, Send, Step, Throttle, parse_workflow, render_key

# Parsed once per version of a type (a type's row is replaced on PUT: a new updated_at).
_PARSED: dict[tuple[str, datetime], list[Step]] = {}
_PARSED_MAX = 1024


def steps_of(kind: NotificationType) -> list[Step] | None:
    if kind.workflow is None:
        return None
    key = (kind.name, kind.updated_at)
    if key not in _PARSED:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = parse_workflow(list(kind.workflow), list(kind.channels))
    return _PARSED[key]


def groups_by_user(kind: NotificationType) -> bool:
    """Whether a step of ``kind`` counts a user's notifications (a digest, a throttle)."""
    return any(isinstance(step, Digest | Throttle) for step in steps_of(kind) or [])


def plan(draft: NotificationDraft, kind: NotificationType, cancel_key: str | None) -> None:
    """Attach the steps of ``kind`` to ``draft`` (nothing for a type without a workflow);
    ``KeyNotRendered`` when a digest's or throttle's key does not render for its data."""
    steps = steps_of(kind)
    if steps is None:
        return
    raw: list[Mapping[str, Any]] = list(kind.workflow or [])
    drafts = []
    for index, step in enumerate(steps):
        held = None
        if isinstance(step, Send):
            held = [_held(asdict(d)) for d in draft.deliveries if d.channel in step.channels]
        key = _group_key(step, draft) if isinstance(step, Digest | Throttle) else None
        drafts.append(StepDraft(index, _kind(step), dict(raw[index]), held, key))
    draft.workflow = WorkflowDraft(drafts, cancel_key)


def _group_key(step: Digest | Throttle, draft: NotificationDraft) -> str:
    if step.key is None:
        return ""
    scope = {**draft.data, "data": draft.data, "user": {"id": draft.user_id}}
    return render_key(step.key, scope)


def _kind(step: Step) -> str:
    return type(step).__name__.lower()


def _held(fields: dict[str, Any]) -> dict[str, Any]:
    status = fields["status"]
    return {
        "id": str(fields["id"]),
        "channel": str(fields["channel"]),
        "address": fields["address"],
        "status": status.value if isinstance(status, Status) else str(status),
        "skipReason": fields["skip_reason"],
    }
