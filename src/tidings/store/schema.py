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
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
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
    _ts("send_at"),
    _ts("created_at", nullable=False),
    sa.UniqueConstraint("namespace", "idempotency_key"),
)

delivery = sa.Table(
    "delivery",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column(
        "notification_id",
        sa.Uuid,
        sa.ForeignKey("notification.id", ondelete="CASCADE"),
        nullable=False,
    ),
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
)

delivery_event = sa.Table(
    "delivery_event",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column(
        "delivery_id",
        sa.Uuid,
        sa.ForeignKey("delivery.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("kind", sa.String(30), nullable=False),
    _ts("at", nullable=False),
    sa.Column("detail", JSONDoc, nullable=True),
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
    sa.UniqueConstraint("namespace", "idempotency_key"),
    sa.Index("ix_campaign_status_send_at", "status", "send_at"),
    sa.Index("ix_campaign_namespace_created_at", "namespace", "created_at"),
)
