"""What a delivery status notification means for tidings: pure mapping, no I/O.

A DSN (``tidings.tracking.dsn``) is about one of our deliveries when the address it was
mailed to names it (VERP: the SMTP account's ``return_path``, ``bounces+<delivery id>@…``),
else when the original it returns carries our ``X-Tidings-Delivery-Id``; one naming neither
is not ours. Each of its recipient statuses then becomes one ``Tracked``, deduplicated on the
report's Message-ID and the recipient:

- ``failed`` with ``5.1.x`` (bad mailbox or domain; not ``5.1.7``/``5.1.8``, the sender's
  address): bounced, BOUNCED, the address suppressed (``hard_bounce``);
- ``failed`` otherwise: BOUNCED, the address kept: ``blocked`` for ``5.7.x`` (policy),
  ``soft_bounced`` for ``5.2.x`` (mailbox full) and a ``4.x.x`` the server gave up on,
  ``bounced`` for the rest;
- ``delayed``: deferred, recorded only (the server is still trying); ``delivered``:
  DELIVERED; ``relayed`` and ``expanded`` say nothing final and are ignored.

A status about an address other than the original's To (a Cc, or a Bcc no header names) is
that copy's, not the delivery's, and is ignored.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tidings.states import Status
from tidings.store.tracking import DeliveryKey, Tracked
from tidings.tracking.dsn import Dsn, RecipientStatus

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_MAX_ID = 255  # webhook_seen.event_id
_SENDER_CODES = ("5.1.7", "5.1.8")  # the sender's address is bad: not the recipient's fault

_Mapped = tuple[str, Status | None, str | None]  # history kind, status, suppression reason


def verp_delivery(address: str) -> uuid.UUID | None:
    """The delivery id the local part of a return-path address holds, if any."""
    match = _UUID.search(address.rpartition("@")[0])
    return uuid.UUID(match.group()) if match else None


def bounce_events(dsn: Dsn, mailed_to: Sequence[str], now: datetime) -> list[Tracked]:
    """The events of ``dsn``, mailed to the addresses ``mailed_to`` (the envelope's)."""
    delivery_id = _delivery(dsn, mailed_to)
    if delivery_id is None:
        return []
    key = DeliveryKey(delivery_id, None)
    events = []
    for status in dsn.recipients:
        mapped = _mapping(status)
        if mapped is not None and not _a_copy(dsn, status):
            events.append(_tracked(key, dsn, status, mapped, now))
    return events


def _delivery(dsn: Dsn, mailed_to: Sequence[str]) -> uuid.UUID | None:
    for address in mailed_to:
        if (found := verp_delivery(address)) is not None:
            return found
    header = dsn.original.delivery_id
    try:
        return uuid.UUID(header) if header else None
    except ValueError:
        return None


def _mapping(status: RecipientStatus) -> _Mapped | None:
    if status.action == "delayed":
        return ("deferred", None, None)
    if status.action == "delivered":
        return ("delivered", Status.DELIVERED, None)
    if status.action != "failed":
        return None
    code = status.status or ""
    if code.startswith("5.1.") and code not in _SENDER_CODES:
        return ("bounced", Status.BOUNCED, "hard_bounce")
    if code.startswith("5.7."):
        return ("blocked", Status.BOUNCED, None)
    if code.startswith(("5.2.", "4.")):
        return ("soft_bounced", Status.BOUNCED, None)
    return ("bounced", Status.BOUNCED, None)


def _a_copy(dsn: Dsn, status: RecipientStatus) -> bool:
    """Whether the status is about a copy (cc, bcc), not the delivery's recipient: the
    delivery is to the original's To, so any other address is a copy's, including a bcc
    that no header names. Without the original's headers nothing tells them apart."""
    named = {status.recipient, status.original_recipient} - {None}
    to = set(dsn.original.to)
    if not to:
        return bool(named & set(dsn.original.cc))
    return bool(named) and not named & to


def _tracked(
    key: DeliveryKey, dsn: Dsn, status: RecipientStatus, mapped: _Mapped, now: datetime
) -> Tracked:
    kind, moves_to, suppress = mapped
    event_id = f"dsn:{dsn.report_id}:{status.recipient or ''}"
    if len(event_id) > _MAX_ID:
        event_id = "dsn:sha256:" + hashlib.sha256(event_id.encode()).hexdigest()
    detail: dict[str, Any] = {
        "action": status.action,
        "status": status.status,
        "diagnostic": status.diagnostic,
        "remote_mta": status.remote_mta,
        "reporting_mta": dsn.reporting_mta,
        "event_id": event_id,
    }
    detail = {name: value for name, value in detail.items() if value}
    return Tracked(key, kind, now, event_id, moves_to, suppress, detail)
