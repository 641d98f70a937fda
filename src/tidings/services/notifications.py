"""Reading a notification back (its deliveries, their history and, for email, what the
recipient did with it) and searching for notifications. (Accepting one is the
intake's: ``intake/``.)"""

from __future__ import annotations

from tidings.store.engagement import EngagementSummary
from tidings.store.engagement import summary as engagement
from tidings.store.intake import Accepted, KeyConflict
from tidings.store.reads import DeliveryEvent, DeliveryRecord, NotificationRecord, get_notification
from tidings.store.search import (
    FoundDelivery,
    FoundNotification,
    Search,
    SearchPage,
    search_notifications,
)

__all__ = [
    "Accepted",
    "DeliveryEvent",
    "DeliveryRecord",
    "EngagementSummary",
    "FoundDelivery",
    "FoundNotification",
    "KeyConflict",
    "NotificationRecord",
    "Search",
    "SearchPage",
    "engagement",
    "get_notification",
    "search_notifications",
]
