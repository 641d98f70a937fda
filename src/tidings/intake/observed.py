"""What the intake tells the metrics (tidings/metrics.py): the notifications it stored and
their deliveries, those skipped at accept among them. Counted after the commit, in memory."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from tidings import metrics
from tidings.intake.drafts import ItemError
from tidings.states import Status
from tidings.store.intake import Accepted, AcceptResult, NotificationDraft

log = logging.getLogger(__name__)


def count_accepted(
    drafts: Sequence[NotificationDraft], stored: Sequence[AcceptResult | ItemError]
) -> None:
    """Count each draft stored now (``stored`` answers ``drafts`` in order); an idempotent
    replay was counted when it was first accepted. Never raises: the 202 is committed."""
    try:
        for draft, result in zip(drafts, stored, strict=True):
            if isinstance(result, Accepted) and not result.replayed:
                metrics.accepted(draft.type, str(draft.priority), _channels(draft))
    except Exception:
        log.exception("counting accepted notifications failed")


def _channels(draft: NotificationDraft) -> list[tuple[str, str | None]]:
    return [
        (str(d.channel), (d.skip_reason or "") if d.status is Status.SKIPPED else None)
        for d in draft.deliveries
    ]
