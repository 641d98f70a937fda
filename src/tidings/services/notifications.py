"""Reading a notification back: its deliveries, their history and, for email, what the
recipient did with it. (Accepting one is the intake's: ``intake/``.)"""

from __future__ import annotations

from tidings.store.engagement import EngagementSummary
from tidings.store.engagement import summary as engagement
from tidings.store.intake import Accepted, KeyConflict
from tidings.store.reads import DeliveryEvent, DeliveryRecord, NotificationRecord, get_notification

__all__ = [
    "Accepted",
    "DeliveryEvent",
    "DeliveryRecord",
    "EngagementSummary",
    "KeyConflict",
    "NotificationRecord",
    "engagement",
    "get_notification",
]
