"""The running service's shared parts, built once from settings and passed around."""

from __future__ import annotations

from dataclasses import dataclass, field

from tidings.content.catalog import TemplateCatalog
from tidings.policy.inbox_tokens import InboxTokens
from tidings.policy.preference_links import PreferenceLinks
from tidings.policy.unsubscribe import Unsubscriber, load_secret
from tidings.providers.chains import ProviderSet, build_providers
from tidings.settings import Settings
from tidings.store.engine import Database, connect
from tidings.store.inbox_wakeup import InboxWakeup
from tidings.store.types import TypeCatalog
from tidings.store.wakeup import Wakeup
from tidings.tracking.engagement_links import EngagementLinks


@dataclass
class Service:
    settings: Settings
    db: Database
    wakeup: Wakeup = field(default_factory=Wakeup)
    types: TypeCatalog = field(init=False)
    templates: TemplateCatalog = field(init=False)
    unsubscriber: Unsubscriber = field(init=False)
    preference_links: PreferenceLinks = field(init=False)
    engagement: EngagementLinks = field(init=False)
    inbox_tokens: InboxTokens = field(init=False)
    inbox_wakeup: InboxWakeup = field(init=False)

    def __post_init__(self) -> None:
        self.types = TypeCatalog(self.db)
        self.templates = TemplateCatalog(self.db)
        secret = load_secret(self.settings.secret_key, self.settings.secret_file)
        self.unsubscriber = Unsubscriber(secret, self.settings.public_url)
        self.preference_links = PreferenceLinks(
            secret, self.settings.public_url, self.settings.preference_link_days
        )
        self.inbox_tokens = InboxTokens(secret, self.settings.inbox.token_seconds)
        inbox = self.settings.inbox
        self.inbox_wakeup = InboxWakeup(
            self.db, inbox.max_streams_per_user, inbox.max_streams_per_process
        )
        self.engagement = EngagementLinks(
            secret, self.settings.public_url, self.settings.tracking_link_days
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Service:
        db = connect(settings.database_url, settings.database_pool_size)
        return cls(settings=settings, db=db)

    async def close(self) -> None:
        await self.inbox_wakeup.close()
        await self.db.dispose()


def providers_from_settings(settings: Settings) -> ProviderSet:
    """The provider accounts a dispatcher sends through, with each channel's failover chain."""
    return build_providers(
        settings.chains(), settings.accounts, settings.outbox_dir, settings.public_url
    )
