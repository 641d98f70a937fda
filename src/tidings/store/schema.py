"""The tables (docs/architecture.md, Tables and who writes them), in SQLAlchemy Core: one schema
for SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
    }
)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both databases.

    SQLite has no time zones: values are stored as naive UTC text, whose lexical order is
    their time order, and come back aware.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: tidings stores aware UTC datetimes only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is not None:
            return value
        return value.replace(tzinfo=UTC)


JSONDoc = sa.JSON().with_variant(JSONB(), "postgresql")


def _ts(name: str, nullable: bool = True) -> sa.Column[Any]:
    return sa.Column(name, UTCDateTime(), nullable=nullable)


notification_type = sa.Table(
    "notification_type",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("category", sa.String(20), nullable=False),
    sa.Column("priority", sa.String(10), nullable=False),
    sa.Column("channels", JSONDoc, nullable=False),
    sa.Column("ttl_seconds", sa.Integer, nullable=True),
    sa.Column("retry", JSONDoc, nullable=True),
    # Channels on which preferences do not apply; NULL: every channel of a transactional type.
    sa.Column("required_channels", JSONDoc, nullable=True),
    # The locale tried after the recipient's own (before "en"), and the push collapse key.
    sa.Column("default_locale", sa.String(35), nullable=True),
    sa.Column("collapse_key", sa.String(64), nullable=True),
    # Email sender of the type's mail: {"fromAddress", "fromName", "replyTo"} (API keys).
    sa.Column("email", JSONDoc, nullable=True),
    # Opens and clicks measured by tidings ({"opens", "clicks"}); NULL: the category's default.
    sa.Column("tracking", JSONDoc, nullable=True),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    # The steps run for each notification, as the API took them (checked at PUT,
    # workflows/shape.py); NULL: one implicit send of every channel.
    sa.Column("workflow", JSONDoc, nullable=True),
)

template = sa.Table(
    "template",
    metadata,
    # Versions are never changed or deleted: a delivery names the version it was sent with.
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("channel", sa.String(20), nullable=False),
    sa.Column("locale", sa.String(35), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("subject", sa.Text, nullable=True),  # email subject, push title
    sa.Column("text", sa.Text, nullable=True),
    sa.Column("html", sa.Text, nullable=True),
    sa.Column("data", JSONDoc, nullable=True),  # push data: key -> template
    _ts("created_at", nullable=False),
    sa.UniqueConstraint("type", "channel", "locale", "version"),
)

notification = sa.Table(
    "notification",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("namespace", sa.String(100), nullable=False),
    sa.Column("idempotency_key", sa.String(255), nullable=False),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("category", sa.String(20), nullable=False),
    sa.Column("priority", sa.String(10), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=True),
    sa.Column("data", JSONDoc, nullable=False),
    sa.Column("locale", sa.String(35), nullable=True),
    sa.Column("campaign_id", sa.Uuid, nullable=True),
    # Email details of this notification: {"replyTo", "cc", "bcc"} (API keys).
    sa.Column("email", JSONDoc, nullable=True),
    # The HTTP request that submitted it (X-Request-Id), carried into the dispatch logs.
    sa.Column("request_id", sa.String(64), nullable=True),
    _ts("send_at"),
    _ts("created_at", nullable=False),
    # The key's uniqueness lives in ``idempotency_key``: on day partitions of its id (the
    # default on PostgreSQL, store/partitions.py), a unique index here could not span the
    # days.
    # The search, newest first (store/search.py): each ends in id, read backwards.
    sa.Index(
        "ix_notification_user",
        "namespace",
        "user_id",
        "id",
        postgresql_where=sa.text("user_id IS NOT NULL"),
        sqlite_where=sa.text("user_id IS NOT NULL"),
    ),
    sa.Index("ix_notification_type", "namespace", "type", "id"),
    sa.Index(
        "ix_notification_campaign",
        "campaign_id",
        "id",
        postgresql_where=sa.text("campaign_id IS NOT NULL"),
        sqlite_where=sa.text("campaign_id IS NOT NULL"),
    ),
)

idempotency_key = sa.Table(
    "idempotency_key",
    metadata,
    # Each (namespace, key) accepted, for ``idempotency_days``: unpartitioned, so a key is
    # unique across every day's partition of ``notification``.
    sa.Column("namespace", sa.String(100), primary_key=True),
    sa.Column("idempotency_key", sa.String(255), primary_key=True),
    sa.Column("notification_id", sa.Uuid, nullable=False),
    sa.Column("request_hash", sa.String(64), nullable=False),
    _ts("created_at", nullable=False),
    sa.Index("ix_idempotency_key_created_at", "created_at"),
)

delivery = sa.Table(
    "delivery",
    metadata,
    # The key includes notification_id, the partition key on day partitions (the default on
    # PostgreSQL, store/partitions.py): a notification's deliveries live in its day.
    # No foreign keys between the three tables: one would keep a day from being detached;
    # the code writes a notification, its deliveries and events together.
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("notification_id", sa.Uuid, primary_key=True),
    sa.Column("channel", sa.String(20), nullable=False),
    sa.Column("address", sa.String(4096), nullable=False),
    sa.Column("priority", sa.String(10), nullable=False),
    sa.Column("category", sa.String(20), nullable=False),
    sa.Column("status", sa.String(12), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    _ts("next_attempt_at"),
    _ts("lease_until"),
    sa.Column("provider", sa.String(100), nullable=True),
    sa.Column("provider_msg_id", sa.String(255), nullable=True),
    sa.Column("template_version", sa.Integer, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("failure_kind", sa.String(12), nullable=True),
    sa.Column("skip_reason", sa.String(40), nullable=True),
    sa.Column("campaign_id", sa.Uuid, nullable=True),
    _ts("created_at", nullable=False),
    _ts("sent_at"),
    _ts("updated_at", nullable=False),
    # When the attempt in flight was about to call an at-most-once account's provider
    # (on_ambiguous = "fail"), written before the call; cleared by its outcome. A lease
    # that expires with it set ends the delivery FAILED ambiguous instead of sending again.
    _ts("send_started_at"),
    # PostgreSQL: the place (event.txid) of its newest status event, set by a trigger: the
    # next one goes no earlier, so its events keep the order of its changes
    # (store/event_triggers.py, version 2). NULL: none yet; unused on SQLite.
    sa.Column("event_txid", sa.BigInteger, nullable=True),
    sa.UniqueConstraint("notification_id", "channel", "address"),
    # The claim query reads only this: it stays small however many finished rows there are.
    sa.Index(
        "ix_delivery_due",
        "priority",
        "next_attempt_at",
        postgresql_where=sa.text("status = 'PENDING'"),
        sqlite_where=sa.text("status = 'PENDING'"),
    ),
    # The reaper reads only leased rows. Not "WHERE status = 'SENDING'": the outcome update
    # filters on that status too, and a planner that believes few rows are SENDING (stale
    # statistics) would then scan this index, dead entries and all, instead of the key.
    sa.Index(
        "ix_delivery_lease",
        "lease_until",
        postgresql_where=sa.text("lease_until IS NOT NULL"),
        sqlite_where=sa.text("lease_until IS NOT NULL"),
    ),
    sa.Index("ix_delivery_provider_msg", "provider", "provider_msg_id"),
    # The relay counts what each topic holds (the Kafka transport's QUEUED rows).
    sa.Index(
        "ix_delivery_queued",
        "priority",
        "channel",
        postgresql_where=sa.text("status = 'QUEUED'"),
        sqlite_where=sa.text("status = 'QUEUED'"),
    ),
    # The dead-letter queue: failed deliveries, newest first.
    # A campaign's deliveries: its counts by status, its cancel, whether it is done.
    sa.Index(
        "ix_delivery_campaign",
        "campaign_id",
        "status",
        postgresql_where=sa.text("campaign_id IS NOT NULL"),
        sqlite_where=sa.text("campaign_id IS NOT NULL"),
    ),
    sa.Index(
        "ix_delivery_failed",
        "updated_at",
        postgresql_where=sa.text("status = 'FAILED'"),
        sqlite_where=sa.text("status = 'FAILED'"),
    ),
    # The search by address (store/search.py): a recipient's deliveries, then their
    # notifications. SKIPPED no_address rows (address '') are left out.
    sa.Index(
        "ix_delivery_address",
        "address",
        "notification_id",
        postgresql_where=sa.text("address <> ''"),
        sqlite_where=sa.text("address <> ''"),
    ),
    # The dashboard's last hour: sends per lane, channel and provider, from the index alone.
    sa.Index(
        "ix_delivery_sent",
        "sent_at",
        "priority",
        "channel",
        "provider",
        postgresql_where=sa.text("sent_at IS NOT NULL"),
        sqlite_where=sa.text("sent_at IS NOT NULL"),
    ),
)

delivery_event = sa.Table(
    "delivery_event",
    metadata,
    # Keyed with delivery_id, the partition key on day partitions (a delivery's id is made
    # with its notification's: its history lives in its day).
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("delivery_id", sa.Uuid, primary_key=True, index=True),
    sa.Column("kind", sa.String(30), nullable=False),
    _ts("at", nullable=False),
    sa.Column("detail", JSONDoc, nullable=True),
)

workflow_step = sa.Table(
    "workflow_step",
    metadata,
    # One row per step of a notification of a type with a workflow (docs/workflows.md),
    # written at accept with the notification, then claimed, leased and fenced like a
    # delivery: (state = 'RUNNING', attempts) is the fence of every completion.
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("notification_id", sa.Uuid, nullable=False),
    sa.Column("step_index", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(10), nullable=False),
    # The step as the type said when the notification was accepted: a type changed later
    # does not change the steps of notifications already accepted.
    sa.Column("spec", JSONDoc, nullable=False),
    # WAITING (an earlier step has not run), PENDING (due at due_at), RUNNING (claimed,
    # leased), DONE, SKIPPED (skip_reason), CANCELLED, FAILED.
    sa.Column("state", sa.String(10), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    _ts("due_at"),
    _ts("lease_until"),
    _ts("ran_at"),
    sa.Column("skip_reason", sa.String(40), nullable=True),
    sa.Column("namespace", sa.String(100), nullable=False),
    sa.Column("cancel_key", sa.String(255), nullable=True),
    sa.Column("priority", sa.String(10), nullable=False),
    sa.Column("category", sa.String(20), nullable=False),
    # A send's deliveries, made at accept (ids, addresses, accept-time skips) and inserted
    # when the step runs: [{"id", "channel", "address", "status", "skipReason"}].
    sa.Column("deliveries", JSONDoc, nullable=True),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    # A digest step: its rendered key (made at accept), and the digest it opened or joined.
    sa.Column("digest_key", sa.String(255), nullable=True),
    sa.Column("digest_id", sa.Uuid, nullable=True),
    sa.UniqueConstraint("notification_id", "step_index"),
    sa.Index(
        "ix_workflow_step_digest_id",
        "digest_id",
        postgresql_where=sa.text("digest_id IS NOT NULL"),
        sqlite_where=sa.text("digest_id IS NOT NULL"),
    ),
    sa.Index(
        "ix_workflow_step_due",
        "due_at",
        postgresql_where=sa.text("state = 'PENDING'"),
        sqlite_where=sa.text("state = 'PENDING'"),
    ),
    sa.Index(
        "ix_workflow_step_lease",
        "lease_until",
        postgresql_where=sa.text("state = 'RUNNING'"),
        sqlite_where=sa.text("state = 'RUNNING'"),
    ),
    sa.Index(
        "ix_workflow_step_cancel",
        "namespace",
        "cancel_key",
        postgresql_where=sa.text("cancel_key IS NOT NULL"),
        sqlite_where=sa.text("cancel_key IS NOT NULL"),
    ),
)

workflow_digest = sa.Table(
    "workflow_digest",
    metadata,
    # Notifications of one type, user and rendered key collapsed into one (docs/workflows.md):
    # at most one OPEN per group (the unique index), closed by its leader's step alone.
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("namespace", sa.String(100), nullable=False),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("digest_key", sa.String(255), nullable=False),  # "" without a key
    # OPEN, CLOSING (full or past its window: its leader closes it), CLOSED.
    sa.Column("state", sa.String(10), nullable=False),
    sa.Column("count", sa.Integer, nullable=False),
    sa.Column("max", sa.Integer, nullable=False),
    # The step of the notification that opened it: it closes it and runs the steps after.
    sa.Column("leader_step_id", sa.Uuid, nullable=False),
    _ts("opened_at", nullable=False),
    _ts("closes_at", nullable=False),
    _ts("closed_at"),
    sa.Index(
        "ix_workflow_digest_open",
        "namespace",
        "type",
        "user_id",
        "digest_key",
        unique=True,
        postgresql_where=sa.text("state = 'OPEN'"),
        sqlite_where=sa.text("state = 'OPEN'"),
    ),
)

workflow_throttle = sa.Table(
    "workflow_throttle",
    metadata,
    # A throttle step's group (docs/workflows.md): when its notifications passed, within
    # the longest window seen; the row is locked while one is judged.
    sa.Column("namespace", sa.String(100), primary_key=True),
    sa.Column("type", sa.String(100), primary_key=True),
    sa.Column("user_id", sa.String(255), primary_key=True),
    sa.Column("throttle_key", sa.String(255), primary_key=True),
    sa.Column("passed", JSONDoc, nullable=False),  # ISO 8601 UTC times, oldest first
    _ts("updated_at", nullable=False),
)

user_profile = sa.Table(
    "user_profile",
    metadata,
    sa.Column("id", sa.String(255), primary_key=True),
    sa.Column("email", sa.String(320), nullable=True),
    sa.Column("phone", sa.String(20), nullable=True),
    sa.Column("timezone", sa.String(64), nullable=True),
    sa.Column("locale", sa.String(35), nullable=True),
    sa.Column("quiet_hours", JSONDoc, nullable=True),  # {"from": "22:00", "to": "08:00"}
    sa.Column("attributes", JSONDoc, nullable=True),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    # The chat channels' addresses (migration 0031).
    sa.Column("slack", sa.String(255), nullable=True),
    sa.Column("discord", sa.String(255), nullable=True),
    sa.Column("teams", sa.String(2048), nullable=True),
    sa.Column("telegram", sa.String(33), nullable=True),
    sa.Column("whatsapp", sa.String(16), nullable=True),  # migration 0036
)

device = sa.Table(
    "device",
    metadata,
    sa.Column("token", sa.String(4096), primary_key=True),
    sa.Column("user_id", sa.String(255), nullable=False, index=True),
    sa.Column("platform", sa.String(10), nullable=False),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("deactivated_reason", sa.String(255), nullable=True),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
)

suppression = sa.Table(
    "suppression",
    metadata,
    # Addresses in their canonical form (see tidings.store.suppressions.canonical_address).
    sa.Column("channel", sa.String(20), primary_key=True),
    sa.Column("address", sa.String(4096), primary_key=True),
    sa.Column("reason", sa.String(255), nullable=False),
    _ts("created_at", nullable=False),
)

preference = sa.Table(
    "preference",
    metadata,
    sa.Column("user_id", sa.String(255), primary_key=True),
    sa.Column("category", sa.String(20), primary_key=True),
    sa.Column("channel", sa.String(20), primary_key=True),
    sa.Column("enabled", sa.Boolean, nullable=False),
    _ts("updated_at", nullable=False),
)

frequency_count = sa.Table(
    "frequency_count",
    metadata,
    # Sends per user, category and the user's local day: the frequency caps' counters.
    sa.Column("user_id", sa.String(255), primary_key=True),
    sa.Column("category", sa.String(20), primary_key=True),
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("sent", sa.Integer, nullable=False),
)

provider_state = sa.Table(
    "provider_state",
    metadata,
    # Each dispatcher's view of each provider account (its circuit breaker), refreshed every
    # few seconds, so that any API process can show it.
    sa.Column("account", sa.String(100), primary_key=True),
    sa.Column("dispatcher", sa.String(64), primary_key=True),
    sa.Column("state", JSONDoc, nullable=False),
    _ts("updated_at", nullable=False),
)

deactivation_guard = sa.Table(
    "deactivation_guard",
    metadata,
    # The fleet's record of each push account's mass deactivation guard (docs/providers.md,
    # Mass deactivation guard): its last trip and its last clear; every dispatcher follows
    # the newer of the two, and an operator's reset is a clear.
    sa.Column("account", sa.String(100), primary_key=True),
    _ts("tripped_at"),
    _ts("hold_until"),
    sa.Column("share", sa.Float, nullable=True),
    sa.Column("samples", sa.Integer, nullable=True),
    sa.Column("reason", sa.String(100), nullable=True),
    sa.Column("tripped_by", sa.String(64), nullable=True),
    _ts("cleared_at"),
    sa.Column("cleared_by", sa.String(64), nullable=True),
    _ts("updated_at", nullable=False),
)

webhook_seen = sa.Table(
    "webhook_seen",
    metadata,
    # Provider events already applied (SendGrid's sg_event_id, a Twilio sid + status), so a
    # retried webhook changes nothing. Pruned after a few days: providers retry for one.
    sa.Column("provider", sa.String(100), primary_key=True),
    sa.Column("event_id", sa.String(255), primary_key=True),
    _ts("at", nullable=False),
    sa.Index("ix_webhook_seen_at", "at"),
)

topic_subscription = sa.Table(
    "topic_subscription",
    metadata,
    # Who follows what (a topic such as "artist:77"); a user needs no profile to follow one.
    sa.Column("topic", sa.String(200), primary_key=True),
    sa.Column("user_id", sa.String(255), primary_key=True),
    _ts("created_at", nullable=False),
    # A user's topics; the key serves a topic's subscribers.
    sa.Index("ix_topic_subscription_user_id", "user_id"),
)

campaign = sa.Table(
    "campaign",
    metadata,
    # A type sent to an audience (docs/architecture.md, Campaigns): expanded page by page
    # into notification and delivery rows, by one dispatcher at a time (expander + lease).
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("namespace", sa.String(100), nullable=False),
    sa.Column("idempotency_key", sa.String(255), nullable=False),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("name", sa.String(200), nullable=True),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("category", sa.String(20), nullable=False),
    sa.Column("priority", sa.String(10), nullable=False),
    sa.Column("audience", JSONDoc, nullable=False),
    sa.Column("data", JSONDoc, nullable=False),
    sa.Column("channels", JSONDoc, nullable=False),
    _ts("send_at", nullable=False),
    sa.Column("spread_seconds", sa.Integer, nullable=False),
    sa.Column("local_time", sa.String(5), nullable=True),  # "10:00" in each user's zone
    sa.Column("timezone", sa.String(64), nullable=True),  # for users without one
    sa.Column("status", sa.String(12), nullable=False),
    # Counted when the expansion starts: the spread divides the window by it.
    sa.Column("audience_size", sa.Integer, nullable=True),
    sa.Column("cursor", sa.String(255), nullable=True),  # the last user id expanded
    sa.Column("expanded", sa.Integer, nullable=False),  # users expanded so far
    sa.Column("deliveries", sa.Integer, nullable=False),  # delivery rows inserted so far
    sa.Column("expander", sa.String(64), nullable=True),
    _ts("lease_until"),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    _ts("started_at"),
    _ts("expanded_at"),
    _ts("finished_at"),
    # Its reputation guard paused it (migration 0037): why, and when; cleared on resume.
    sa.Column("paused_reason", sa.String(300), nullable=True),
    _ts("paused_at"),
    sa.UniqueConstraint("namespace", "idempotency_key"),
    sa.Index("ix_campaign_status_send_at", "status", "send_at"),
    sa.Index("ix_campaign_namespace_created_at", "namespace", "created_at"),
)

api_key = sa.Table(
    "api_key",
    metadata,
    # Who may call the API (docs/security.md): a key is shown once and stored as its
    # SHA-256 (keys carry 256 random bits, so a slow hash would buy nothing). A revoked key
    # stays, so that revoking the last key never opens the service again.
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("name", sa.String(100), nullable=False, unique=True),
    sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("prefix", sa.String(16), nullable=False),  # shown in listings and logs
    sa.Column("namespace", sa.String(100), nullable=False),
    sa.Column("scopes", JSONDoc, nullable=False),
    # Notifications per second this key may submit (None: no limit of its own).
    sa.Column("accept_rate", sa.Float, nullable=True),
    _ts("created_at", nullable=False),
    _ts("revoked_at"),
)

inbound_reply = sa.Table(
    "inbound_reply",
    metadata,
    # Replies to an SMS number (Twilio's inbound webhook): the keyword and what it did
    # (suppressed, lifted, none), never the message text itself. HELP and INFO are kept here
    # for the operator; a STOP is also a suppression.
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("account", sa.String(100), nullable=False),
    # The provider's message id (Twilio's MessageSid): a retried webhook is recorded once.
    sa.Column("message_id", sa.String(64), nullable=True, unique=True),
    sa.Column("sender", sa.String(32), nullable=False),
    sa.Column("keyword", sa.String(20), nullable=True),  # None: not one of the keywords
    sa.Column("action", sa.String(12), nullable=False),
    _ts("at", nullable=False),
    sa.Index("ix_inbound_reply_at", "at"),
)

whatsapp_window = sa.Table(
    "whatsapp_window",
    metadata,
    # WhatsApp's 24-hour customer service window: when a number last wrote to an account's
    # business number (its inbound webhooks). Free text goes out only inside the window
    # (providers/_whatsapp_window.py); the row keeps the newest message's time only.
    sa.Column("account", sa.String(100), primary_key=True),
    sa.Column("number", sa.String(16), primary_key=True),  # E.164, as the address is
    _ts("last_inbound_at", nullable=False),
)

event = sa.Table(
    "event",
    metadata,
    # Every status change and tracking event (docs/events.md): written by triggers
    # (store/event_triggers.py) in the transaction of the change itself, whoever makes it,
    # so none is lost and none invented. Read by GET /v1/events in (txid, id) order.
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    # PostgreSQL: its place, the writing transaction's id (a delivery's event: no earlier
    # than its previous one's); a reader returns only places below every running
    # transaction's id, so a later commit never lands behind its cursor. SQLite: NULL.
    sa.Column("txid", sa.BigInteger, nullable=True),
    sa.Column("type", sa.String(40), nullable=False),
    _ts("at", nullable=False),
    sa.Column("notification_id", sa.Uuid, nullable=True),
    sa.Column("delivery_id", sa.Uuid, nullable=True),
    sa.Column("campaign_id", sa.Uuid, nullable=True),
    sa.Column("data", JSONDoc, nullable=True),
    sa.Index("ix_event_txid_id", "txid", "id"),
    # SQLite: ids never reused, even after the newest rows are deleted (cursors only grow).
    sqlite_autoincrement=True,
)

webhook_endpoint = sa.Table(
    "webhook_endpoint",
    metadata,
    # A producer's receiver of events (docs/events.md, Webhooks): which events, from where in
    # the event log it has been given them (its cursor), and the secret it verifies with.
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("namespace", sa.String(100), nullable=False),
    sa.Column("url", sa.String(2048), nullable=False),
    sa.Column("events", JSONDoc, nullable=False),  # event types, e.g. ["delivery.sent"]
    sa.Column("types", JSONDoc, nullable=True),  # notification types; NULL: every type
    # Stored as it is: tidings signs with it. Those it replaced sign too, each for 24 h:
    # [{"secret", "until" (ISO 8601)}], newest first; NULL: never rotated.
    sa.Column("secret", sa.String(100), nullable=False),
    sa.Column("previous_secrets", JSONDoc, nullable=True),
    sa.Column("status", sa.String(10), nullable=False),  # active, disabled
    sa.Column("disabled_reason", sa.Text, nullable=True),
    sa.Column("cursor_txid", sa.BigInteger, nullable=False),
    sa.Column("cursor_id", sa.BigInteger, nullable=False),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
)

webhook_message = sa.Table(
    "webhook_message",
    metadata,
    # One event for one endpoint: its body as first serialised (every retry signs the same
    # bytes), sent in order per notification (order_key), retried for up to three days.
    sa.Column("id", sa.Uuid, primary_key=True),  # webhook-id: msg_<hex>
    sa.Column("endpoint_id", sa.Uuid, nullable=False),
    sa.Column("order_key", sa.Uuid, nullable=False),  # the notification (or campaign)
    # Its event's place in the log (store/events.Cursor), the order of a notification's
    # messages: ids, made from each process's clock, need not follow it across processes.
    sa.Column("event_txid", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("event_id", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("event_type", sa.String(40), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("status", sa.String(10), nullable=False),  # PENDING, SENT, FAILED
    sa.Column("attempts", sa.Integer, nullable=False),
    _ts("next_attempt_at", nullable=False),
    _ts("lease_until"),
    _ts("first_attempt_at"),
    sa.Column("last_status", sa.Integer, nullable=True),  # the receiver's HTTP status
    sa.Column("last_error", sa.Text, nullable=True),
    _ts("created_at", nullable=False),
    _ts("sent_at"),
    sa.Index(
        "ix_webhook_message_due",
        "next_attempt_at",
        postgresql_where=sa.text("status = 'PENDING'"),
        sqlite_where=sa.text("status = 'PENDING'"),
    ),
    sa.Index("ix_webhook_message_order", "endpoint_id", "order_key", "event_txid", "event_id"),
)

report_counter = sa.Table(
    "report_counter",
    metadata,
    # Campaign and type reports (docs/events.md, Reports): counts folded from the event log
    # by the dispatchers, so a report reads a few rows, never every delivery. ``scope`` is
    # "campaign:<id>" or "type:<namespace>:<type>:<YYYY-MM-DD>".
    sa.Column("scope", sa.String(400), primary_key=True),
    sa.Column("metric", sa.String(60), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

report_unique = sa.Table(
    "report_unique",
    metadata,
    # The deliveries already counted once for a unique metric (the first open, click).
    sa.Column("delivery_id", sa.Uuid, primary_key=True),
    sa.Column("metric", sa.String(30), primary_key=True),
)

report_cursor = sa.Table(
    "report_cursor",
    metadata,
    # How far into the event log the reports are folded (one row).
    sa.Column("name", sa.String(20), primary_key=True),
    sa.Column("txid", sa.BigInteger, nullable=False),
    sa.Column("event_id", sa.BigInteger, nullable=False),
)

early_status = sa.Table(
    "early_status",
    metadata,
    # A provider's status for a delivery that is still being sent (its event outran the
    # outcome of the send, which is written in batches): applied once the delivery is SENT
    # (store/tracking.settle_early, run with the reaper). Its event is in the history already,
    # unless ``pending`` holds it: an event whose account was not yet known to be the
    # delivery's, written whole (history, suppression, move) once it is, else dropped.
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("delivery_id", sa.Uuid, nullable=False, index=True),
    sa.Column("status", sa.String(12), nullable=True),  # NULL: the event moves nothing
    sa.Column("failure_kind", sa.String(12), nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    _ts("at", nullable=False),
    # {"accounts": [...], "kind", "at", "detail", "suppress"}: see above.
    sa.Column("pending", JSONDoc, nullable=True),
)

inbox_message = sa.Table(
    "inbox_message",
    metadata,
    # One message of a user's in-app feed (docs/inbox.md): what an ``inbox`` delivery stored,
    # whole, since it outlives its delivery (``inbox.retention_days``, 90, against the
    # notifications' 30). Its id is made when it is stored, so the feed's order (newest
    # first, by id) is the order messages arrived in and a cursor never skips one.
    sa.Column("id", sa.Uuid, primary_key=True),
    # Unique: a delivery sent again (a lost outcome) stores nothing twice.
    sa.Column("delivery_id", sa.Uuid, nullable=False, unique=True),
    sa.Column("notification_id", sa.Uuid, nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("category", sa.String(20), nullable=False),
    sa.Column("subject", sa.Text, nullable=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("data", JSONDoc, nullable=False),
    _ts("created_at", nullable=False),
    _ts("seen_at"),
    _ts("read_at"),
    _ts("archived_at"),
    # The feed: a user's messages, newest first.
    sa.Index("ix_inbox_message_user_id_id", "user_id", "id"),
)
