"""The triggers that write ``event`` rows (docs/events.md), in the transaction of the change
that causes them: a delivery reaching a status a producer hears of, a tracking event in its
history, a campaign ending. Triggers, not calls in each writer, so that no path that
changes a status (outcomes, webhooks, the reaper, cancels, replays) can forget one.

Kept by version: a migration creates the version of its day, and a later change is a new
version made by a new migration.

Version 2 (PostgreSQL) places each delivery's events in the order of its status changes. The
log is read in (txid, id) order, and a transaction takes its id at its first write, not at
its commit: a provider's status applied by a transaction that wrote something (its dedup
row) before the send's outcome committed would have the older id, its DELIVERED placed
before the SENT. So a status event's ``txid`` is the greater of its transaction's id and
the place of the delivery's previous event, kept on the row (``delivery.event_txid``) by a
trigger that runs before the update, on the row version the update locked: the newest
committed, since status changes of one delivery take its row lock in turn. A tracking event
(an open) goes no earlier than the delivery's status events committed before it. The
feed stays safe: a place is never below its own transaction's id, and every id taken
later is above every place a page already returned.
"""

from __future__ import annotations

STATUSES = "('SENT', 'DELIVERED', 'BOUNCED', 'FAILED', 'SKIPPED', 'EXPIRED', 'CANCELLED')"
TRACKING_KINDS = "('opened', 'clicked', 'complained', 'unsubscribed')"
CAMPAIGN_ENDS = "('DONE', 'CANCELLED')"

_PG_TXID = "pg_current_xact_id()::text::bigint"
# A status event's condition; the BEFORE trigger that places it (version 2) has the same.
_STATUS_EVENT = f"OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN {STATUSES}"
_PG_DELIVERY_DATA = (
    "jsonb_build_object('status', NEW.status, 'channel', NEW.channel, 'provider', NEW.provider,"
    " 'attempts', NEW.attempts, 'failureKind', NEW.failure_kind, 'skipReason', NEW.skip_reason)"
)


def _pg_status_function(txid: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION tidings_delivery_status_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event (txid, type, at, notification_id, delivery_id, campaign_id, data)
    VALUES ({txid}, 'delivery.' || lower(NEW.status), NEW.updated_at, NEW.notification_id,
            NEW.id, NEW.campaign_id, {_PG_DELIVERY_DATA});
    RETURN NULL;
END $$
"""


def _pg_tracking_function(txid: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION tidings_delivery_tracking_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event (txid, type, at, notification_id, delivery_id, campaign_id, data)
    SELECT {txid}, 'delivery.' || NEW.kind, NEW.at, d.notification_id, NEW.delivery_id,
           d.campaign_id, NEW.detail
    FROM delivery AS d WHERE d.id = NEW.delivery_id LIMIT 1;
    RETURN NULL;
END $$
"""


V1_POSTGRES = [
    _pg_status_function(_PG_TXID),
    _pg_tracking_function(_PG_TXID),
    f"""
CREATE OR REPLACE FUNCTION tidings_campaign_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event (txid, type, at, campaign_id, data)
    VALUES ({_PG_TXID}, 'campaign.' || lower(NEW.status), NEW.updated_at, NEW.id,
            jsonb_build_object('status', NEW.status, 'name', NEW.name, 'type', NEW.type,
                               'deliveries', NEW.deliveries));
    RETURN NULL;
END $$
""",
    *(
        f"""
CREATE TRIGGER {name} AFTER {when} FOR EACH ROW WHEN ({condition})
EXECUTE FUNCTION {function}()
"""
        for name, when, condition, function in (
            (
                "delivery_status_event",
                "UPDATE OF status ON delivery",
                _STATUS_EVENT,
                "tidings_delivery_status_event",
            ),
            (
                "delivery_skipped_event",
                "INSERT ON delivery",
                "NEW.status = 'SKIPPED'",
                "tidings_delivery_status_event",
            ),
            (
                "delivery_tracking_event",
                "INSERT ON delivery_event",
                f"NEW.kind IN {TRACKING_KINDS}",
                "tidings_delivery_tracking_event",
            ),
            (
                "campaign_end_event",
                "UPDATE OF status ON campaign",
                f"OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN {CAMPAIGN_ENDS}",
                "tidings_campaign_event",
            ),
        )
    ),
]

_SQLITE_DELIVERY = """
BEGIN
    INSERT INTO event (txid, type, at, notification_id, delivery_id, campaign_id, data)
    VALUES (NULL, 'delivery.' || lower(NEW.status), NEW.updated_at, NEW.notification_id,
            NEW.id, NEW.campaign_id,
            json_object('status', NEW.status, 'channel', NEW.channel, 'provider', NEW.provider,
                        'attempts', NEW.attempts, 'failureKind', NEW.failure_kind,
                        'skipReason', NEW.skip_reason));
END
"""
V1_SQLITE = [
    f"""
CREATE TRIGGER delivery_status_event AFTER UPDATE OF status ON delivery FOR EACH ROW
WHEN OLD.status IS NOT NEW.status AND NEW.status IN {STATUSES}
{_SQLITE_DELIVERY}
""",
    f"""
CREATE TRIGGER delivery_skipped_event AFTER INSERT ON delivery FOR EACH ROW
WHEN NEW.status = 'SKIPPED'
{_SQLITE_DELIVERY}
""",
    f"""
CREATE TRIGGER delivery_tracking_event AFTER INSERT ON delivery_event FOR EACH ROW
WHEN NEW.kind IN {TRACKING_KINDS}
BEGIN
    INSERT INTO event (txid, type, at, notification_id, delivery_id, campaign_id, data)
    SELECT NULL, 'delivery.' || NEW.kind, NEW.at, d.notification_id, NEW.delivery_id,
           d.campaign_id, NEW.detail
    FROM delivery AS d WHERE d.id = NEW.delivery_id LIMIT 1;
END
""",
    f"""
CREATE TRIGGER campaign_end_event AFTER UPDATE OF status ON campaign FOR EACH ROW
WHEN OLD.status IS NOT NEW.status AND NEW.status IN {CAMPAIGN_ENDS}
BEGIN
    INSERT INTO event (txid, type, at, campaign_id, data)
    VALUES (NULL, 'campaign.' || lower(NEW.status), NEW.updated_at, NEW.id,
            json_object('status', NEW.status, 'name', NEW.name, 'type', NEW.type,
                        'deliveries', NEW.deliveries));
END
""",
]
V1_TRIGGERS = (
    ("delivery_status_event", "delivery"),
    ("delivery_skipped_event", "delivery"),
    ("delivery_tracking_event", "delivery_event"),
    ("campaign_end_event", "campaign"),
)
V1_FUNCTIONS = (
    "tidings_delivery_status_event",
    "tidings_delivery_tracking_event",
    "tidings_campaign_event",
)


V2_POSTGRES = [
    f"""
CREATE OR REPLACE FUNCTION tidings_delivery_event_place() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.event_txid := greatest({_PG_TXID}, OLD.event_txid);
    RETURN NEW;
END $$
""",
    f"""
CREATE TRIGGER delivery_event_place BEFORE UPDATE OF status ON delivery FOR EACH ROW
WHEN ({_STATUS_EVENT}) EXECUTE FUNCTION tidings_delivery_event_place()
""",
    # An insert (SKIPPED at accept) has no place yet: its transaction's id.
    _pg_status_function(f"coalesce(NEW.event_txid, {_PG_TXID})"),
    _pg_tracking_function(f"greatest({_PG_TXID}, d.event_txid)"),
]
V2_DROP_POSTGRES = [
    "DROP TRIGGER IF EXISTS delivery_event_place ON delivery",
    "DROP FUNCTION IF EXISTS tidings_delivery_event_place()",
    _pg_status_function(_PG_TXID),
    _pg_tracking_function(_PG_TXID),
]


def v1_statements(dialect: str) -> list[str]:
    return V1_POSTGRES if dialect == "postgresql" else V1_SQLITE


def v1_drop_statements(dialect: str) -> list[str]:
    drops = [
        f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if dialect == "postgresql" else "")
        for name, table in V1_TRIGGERS
    ]
    if dialect == "postgresql":
        drops += [f"DROP FUNCTION IF EXISTS {name}()" for name in V1_FUNCTIONS]
    return drops
