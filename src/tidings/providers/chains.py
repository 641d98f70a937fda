"""The provider accounts a dispatcher sends through, and each channel's failover chain."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tidings.priorities import Channel
from tidings.providers.accounts import AccountSettings
from tidings.providers.base import Provider
from tidings.providers.kinds import (
    NoopAccount,
    RecordAccount,
    SinkAccount,
    build_provider,
)

# Push tokens of one platform may go through their own chain (APNs for iOS, FCM for the
# rest); a platform without one uses the push chain.
PLATFORM_CHAINS = ("push_ios", "push_android", "push_web")


@dataclass
class ProviderSet:
    """Providers by account name, and per channel the names to try, in order."""

    providers: dict[str, Provider]
    chains: dict[str, list[str]]
    accounts: dict[str, AccountSettings] = field(default_factory=dict)

    @classmethod
    def per_channel(cls, mapping: Mapping[Channel, Provider]) -> ProviderSet:
        """One provider per channel, no failover (tests): named by the provider's name,
        and by channel too when two different providers share a name."""
        providers: dict[str, Provider] = {}
        chains: dict[str, list[str]] = {}
        for channel, provider in mapping.items():
            name = provider.name
            if providers.get(name, provider) is not provider:
                name = f"{provider.name}:{channel.value}"
            providers[name] = provider
            chains[channel.value] = [name]
        return cls(providers, chains)

    def chain(self, channel: str, platform: str | None = None) -> list[str]:
        """The chain of ``channel``; for push, that of the device's platform if it has one."""
        if platform is not None:
            found = self.chains.get(f"{channel}_{platform}")
            if found is not None:
                return found
        return self.chains[channel]

    @property
    def routes_by_platform(self) -> bool:
        """Whether some platform has a push chain of its own."""
        push = self.chains.get("push")
        return any(self.chains.get(name, push) != push for name in PLATFORM_CHAINS)

    def recorded_name(self, account: str) -> str | None:
        """What deliveries record as their provider: the account's name, but for the
        development kinds (sink, noop, record) their own short name."""
        kind = self.accounts.get(account)
        if kind is None or isinstance(kind, SinkAccount | NoopAccount | RecordAccount):
            return None
        return account

    def at_most_once(self, account: str) -> bool:
        """Whether ``account`` fails an ambiguous outcome rather than retry it."""
        settings = self.accounts.get(account)
        return settings is not None and settings.on_ambiguous == "fail"

    async def close(self) -> None:
        for provider in {id(p): p for p in self.providers.values()}.values():
            await provider.close()


def builtin_account(spec: str) -> AccountSettings:
    """``sink``, ``noop`` or ``record:<path>[?delay_ms=N]``."""
    if spec == "sink":
        return SinkAccount()
    if spec == "noop":
        return NoopAccount()
    if spec.startswith("record:"):
        parts = urlsplit(spec.removeprefix("record:"))
        delay_ms = float(parse_qs(parts.query).get("delay_ms", ["0"])[0])
        return RecordAccount(path=Path(parts.path), delay_ms=delay_ms)
    raise ValueError(f"unknown provider {spec!r}: expected sink, noop or record:<path>")


def build_providers(
    chains: Mapping[str, list[str]],
    configured: Mapping[str, AccountSettings],
    outbox_dir: Path,
    public_url: str,
) -> ProviderSet:
    """Every account a chain names (``configured`` ones, else the built-in ``sink``, ``noop``
    and ``record:``), built once even when several chains share it."""
    accounts: dict[str, AccountSettings] = {}
    for name in (name for chain in chains.values() for name in chain):
        if name not in accounts:
            accounts[name] = configured.get(name) or builtin_account(name)
    providers = {
        name: build_provider(name, account, outbox_dir, public_url)
        for name, account in accounts.items()
    }
    return ProviderSet(providers, dict(chains), accounts)
