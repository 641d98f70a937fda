"""One typed settings object, built from the environment and an optional TOML file.

The configuration root: each section's model lives beside the code that reads it
(``dispatch/lanes/settings.py``, ``dispatch/pipeline/retry.py``, ``dispatch/protection/breaker.py``,
``dispatch/protection/deactivation_guard.py``, ``dispatch/protection/ratelimit.py``,
``providers/kinds.py``, ``transport/settings.py``, ``tracking/bounce_settings.py``) and is
aggregated here; that code takes its section as an argument and never imports this module
(docs/architecture.md, Import layers).

Environment variables use the prefix ``TIDINGS_`` (nested fields with ``__``, for example
``TIDINGS_LANES__HIGH__CONCURRENCY=32``). The TOML file is named by ``TIDINGS_CONFIG`` or
passed explicitly; the environment wins over the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from tidings.background.inbox_settings import InboxSettings
from tidings.background.producer_webhooks import ProducerWebhookSettings
from tidings.campaigns.settings import CampaignSettings
from tidings.dispatch.lanes.settings import Lanes
from tidings.dispatch.pipeline.retry import RetrySettings
from tidings.dispatch.protection.breaker import BreakerSettings
from tidings.dispatch.protection.deactivation_guard import DeactivationGuardSettings
from tidings.dispatch.protection.ratelimit import RateLimitSettings
from tidings.priorities import Channel
from tidings.providers.chains import PLATFORM_CHAINS
from tidings.providers.kinds import Account
from tidings.tracking.bounce_settings import BounceSettings
from tidings.transport.settings import KafkaSettings

DEFAULT_CHAINS: dict[str, str | list[str]] = {
    "email": "sink",
    "sms": "sink",
    "push": "sink",
    "webhook": "sink",
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TIDINGS_", env_nested_delimiter="__", extra="ignore"
    )

    database_url: str = "sqlite:///./tidings.db"
    # Shared rate limits, in-flight caps, breakers and dedup keys for a fleet of dispatchers
    # (redis://host:6379/0). Unset: each process limits itself to its share of each rate.
    redis_url: str | None = None
    # How work reaches the senders: "direct" (dispatchers claim rows from the database) or
    # "kafka" (relays publish due deliveries to Kafka topics per priority, workers consume
    # them; PostgreSQL only). See docs/architecture.md, Kafka transport.
    transport: Literal["direct", "kafka"] = "direct"
    # The Kafka brokers (host:port[,host:port...]) when transport = "kafka".
    kafka_bootstrap: str | None = None
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    # Connections per process (PostgreSQL); the pool may open as many again under bursts.
    database_pool_size: int = Field(default=10, ge=1, le=200)
    outbox_dir: Path = Path("./outbox")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    namespace: str = "default"
    # Where recipients reach this service (unsubscribe links); use https in production.
    public_url: str = "http://127.0.0.1:8000"
    # Open-pixel and click links (docs/tracking.md) stop working after this many days.
    tracking_link_days: int = Field(default=365, ge=1, le=3650)
    # Preference center links (/p/..., docs/inbox.md) stop working after this many days.
    preference_link_days: int = Field(default=90, ge=1, le=3650)
    # Signs unsubscribe, preference, open and click links. Unset: a random one kept in secret_file.
    secret_key: str | None = None
    secret_file: Path = Path("./tidings.secret")
    # API keys (docs/security.md): a revoked key stops working within this many seconds in
    # every API process, as does the open access of a service whose first key was just made.
    api_key_refresh_seconds: float = Field(default=2.0, ge=0, le=300)
    # Serve on an address other than loopback while no API key exists (`--no-auth`).
    allow_no_keys: bool = False
    # One log line per HTTP request; off by default (paths can carry user ids and tokens).
    access_log: bool = False
    # Metrics (docs/operations.md): a directory every process of one service writes its
    # metrics to, for /metrics to add them up (sets PROMETHEUS_MULTIPROC_DIR); None: each
    # process serves its own. And how stale the gauges read from the database may be.
    metrics_dir: Path | None = None
    metrics_refresh_seconds: float = Field(default=5.0, ge=0, le=300)

    # Provider accounts by name: kind (smtp, sendgrid, twilio, fcm, apns, webhook, sink,
    # noop, record), credentials, rate_per_second, max_in_flight, timeout.
    accounts: dict[str, Account] = Field(default_factory=dict)
    # The failover chain of each channel: account names, or the built-in "sink", "noop" and
    # "record:<path>[?delay_ms=N]". One name alone is a chain of one.
    providers: dict[str, str | list[str]] = Field(default_factory=lambda: dict(DEFAULT_CHAINS))
    provider_timeout: float = Field(default=30.0, gt=0)
    # Per account: a circuit breaker, and the shares of its rate each priority may use.
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    rate_limits: RateLimitSettings = Field(default_factory=RateLimitSettings)
    # Per push account: hold its push, and deactivate no token, when too many sends in a
    # minute answer as a wrong APNs environment or topic, or FCM project, would.
    deactivation_guard: DeactivationGuardSettings = Field(default_factory=DeactivationGuardSettings)
    # The SMTP listener for bounces mailed after acceptance (DSNs to an SMTP account's
    # return_path), run by the processes that run the API. None: not run.
    bounces: BounceSettings | None = None

    # Events pushed to producers' webhook endpoints (docs/events.md, Webhooks).
    webhooks: ProducerWebhookSettings = Field(default_factory=ProducerWebhookSettings)

    # The in-app inbox (docs/inbox.md): its retention, user tokens, CORS, live streams.
    inbox: InboxSettings = Field(default_factory=InboxSettings)

    lanes: Lanes = Field(default_factory=Lanes)
    # Campaign expansion: page size, the expander's lease, due spikes, cancel's wait.
    campaigns: CampaignSettings = Field(default_factory=CampaignSettings)
    retry: RetrySettings = Field(default_factory=RetrySettings)
    lease_seconds: float = Field(default=60.0, gt=0)
    reaper_interval: float = Field(default=5.0, gt=0)
    # Retention (docs/architecture.md, Retention and partitions): notifications, deliveries
    # and events are kept this many days, then dropped with their day's partition (on
    # PostgreSQL's day partitions, the default) or deleted in batches (plain tables: SQLite,
    # or a PostgreSQL database the migration found too large to convert), unless one of
    # their deliveries is still in progress. Idempotency keys are kept ``idempotency_days``:
    # after that, a key used again makes a new notification. Day partitions are made
    # ``partitions_ahead`` days ahead.
    retention_days: int = Field(default=30, ge=1)
    idempotency_days: int = Field(default=7, ge=1)
    partitions_ahead: int = Field(default=7, ge=1, le=366)
    # Seconds the outcome writer waits to gather a batch before each write. 0 (the default):
    # a group commit, written as soon as one is queued, those that come during a write going
    # with the next (fewer sends repeated after a crash: docs/benchmarks.md, crash repeats).
    outcome_flush_interval: float = Field(default=0.0, ge=0, le=10)
    shutdown_grace: float = Field(default=10.0, ge=0)
    # A delivery held by quiet hours goes out at the window's end plus up to this many seconds.
    quiet_hours_jitter: float = Field(default=600.0, ge=0)
    # Sends per user and category per local day; categories absent here have no cap, and
    # transactional messages never do.
    frequency_caps: dict[str, int] = Field(default_factory=lambda: {"marketing": 3})

    # An SMS template rendering to more segments than this fails (poison) instead of sending.
    sms_max_segments: int = Field(default=10, ge=1, le=20)

    # Intake limits.
    max_body_bytes: int = 256 * 1024
    max_batch_body_bytes: int = 16 * 1024 * 1024
    max_data_bytes: int = 32 * 1024
    send_at_tolerance: float = 60.0

    @model_validator(mode="after")
    def _chains_name_known_accounts(self) -> Settings:
        channels = {c.value for c in Channel} | set(PLATFORM_CHAINS)
        for channel, chain in self.providers.items():
            if channel == Channel.INBOX.value:
                raise ValueError(
                    "providers.inbox: the inbox channel has no provider (its messages are "
                    "stored for the user's feed, docs/inbox.md)"
                )
            if channel not in channels:
                raise ValueError(
                    f"providers: unknown channel {channel!r} (expected one of "
                    f"{', '.join(sorted(channels))})"
                )
            for name in [chain] if isinstance(chain, str) else chain:
                builtin = name in ("sink", "noop") or name.startswith("record:")
                if name not in self.accounts and not builtin:
                    raise ValueError(
                        f"providers.{channel}: no account named {name!r} (define it under "
                        "accounts, or use sink, noop or record:<path>)"
                    )
            if not chain:
                raise ValueError(f"providers.{channel}: the chain is empty")
        return self

    @model_validator(mode="after")
    def _kafka_has_what_it_needs(self) -> Settings:
        if self.transport != "kafka":
            return self
        if not self.kafka_bootstrap:
            raise ValueError("transport = kafka needs kafka_bootstrap (TIDINGS_KAFKA_BOOTSTRAP)")
        if not self.database_url.startswith("postgresql"):
            raise ValueError(
                "transport = kafka needs PostgreSQL (TIDINGS_DATABASE_URL=postgresql://...): "
                "relays and workers on several machines share one database"
            )
        return self

    def chain(self, channel: str) -> list[str]:
        """The failover chain of ``channel`` (or of ``push_ios`` and the like, else that of
        ``push``): account names, the first tried first. The inbox's is its built-in
        account, ``inbox``."""
        if channel == Channel.INBOX.value:
            return ["inbox"]
        chain = self.providers.get(channel) or self.providers.get(channel.split("_")[0], "sink")
        return [chain] if isinstance(chain, str) else list(chain)

    def chains(self) -> dict[str, list[str]]:
        """The chain of every channel and of every platform's push."""
        # The inbox has no provider chain: every dispatcher stores its messages itself.
        names = [c.value for c in Channel if c is not Channel.INBOX] + list(PLATFORM_CHAINS)
        return {name: self.chain(name) for name in names}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = settings_cls.model_config.get("toml_file") or os.environ.get("TIDINGS_CONFIG")
        toml = TomlConfigSettingsSource(settings_cls, toml_file=toml_file)
        return (init_settings, env_settings, toml)

    @classmethod
    def load(cls, config_file: Path | None = None, **overrides: Any) -> Settings:
        """Settings from explicit overrides, the environment, then the TOML file."""
        if config_file is None:
            return cls(**overrides)
        if not config_file.is_file():
            raise FileNotFoundError(f"configuration file not found: {config_file}")

        class _FromFile(cls):  # type: ignore[valid-type,misc]
            model_config = SettingsConfigDict(**{**cls.model_config, "toml_file": config_file})

        return _FromFile(**overrides)
