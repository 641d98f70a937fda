"""What the API answers about outcomes and the machinery: a campaign's or a type's report,
and the provider accounts with their breakers and deactivation guards."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .results import Json, _maybe_at


@dataclass(frozen=True)
class ReportRates:
    """Shares of ``sent`` (None when nothing was sent)."""

    delivered: float | None
    bounced: float | None
    complained: float | None
    unsubscribed: float | None
    opened: float | None
    clicked: float | None

    @classmethod
    def from_wire(cls, d: Json) -> ReportRates:
        names = ("delivered", "bounced", "complained", "unsubscribed", "opened", "clicked")
        return cls(*(d.get(name) for name in names))


@dataclass(frozen=True)
class Report:
    """What happened to a campaign's (or a type's) deliveries. Opens count ``unique`` and
    ``unique_human`` (without the mail scanners' prefetches)."""

    sent: int
    delivered: int
    bounced: int
    complained: int
    unsubscribed: int
    failed: int
    expired: int
    cancelled: int
    skipped: int
    skipped_by_reason: dict[str, int]
    opened: int
    opened_unique: int
    opened_unique_human: int
    clicked: int
    clicked_unique: int
    rates: ReportRates

    @classmethod
    def from_wire(cls, d: Json) -> Report:
        opened, clicked, skipped = d["opened"], d["clicked"], d["skipped"]
        return cls(
            sent=d["sent"],
            delivered=d["delivered"],
            bounced=d["bounced"],
            complained=d["complained"],
            unsubscribed=d["unsubscribed"],
            failed=d["failed"],
            expired=d["expired"],
            cancelled=d["cancelled"],
            skipped=skipped["total"],
            skipped_by_reason=skipped["byReason"],
            opened=opened["total"],
            opened_unique=opened["unique"],
            opened_unique_human=opened["uniqueHuman"],
            clicked=clicked["total"],
            clicked_unique=clicked["unique"],
            rates=ReportRates.from_wire(d["rates"]),
        )


@dataclass(frozen=True)
class DeactivationGuard:
    """A push account's mass deactivation guard: ``clear``, ``tripped`` or ``probing``."""

    state: str
    tripped_at: datetime | None
    hold_until: datetime | None
    share: float | None
    samples: int | None
    reason: str | None
    cleared_at: datetime | None
    cleared_by: str | None

    @classmethod
    def from_wire(cls, d: Json) -> DeactivationGuard:
        return cls(
            state=d["state"],
            tripped_at=_maybe_at(d.get("trippedAt")),
            hold_until=_maybe_at(d.get("holdUntil")),
            share=d.get("share"),
            samples=d.get("samples"),
            reason=d.get("reason"),
            cleared_at=_maybe_at(d.get("clearedAt")),
            cleared_by=d.get("clearedBy"),
        )


@dataclass(frozen=True)
class ProviderAccount:
    """An account's settings and state; ``breakers`` are as each dispatcher last shared
    them (``dispatcher``, ``updatedAt``, ``state``), as the API shows them."""

    name: str
    kind: str | None
    channels: tuple[str, ...]
    rate_per_second: float | None
    max_in_flight: int | None
    breakers: tuple[Json, ...]
    deactivation_guard: DeactivationGuard

    @classmethod
    def from_wire(cls, d: Json) -> ProviderAccount:
        return cls(
            name=d["name"],
            kind=d.get("kind"),
            channels=tuple(d["channels"]),
            rate_per_second=d.get("ratePerSecond"),
            max_in_flight=d.get("maxInFlight"),
            breakers=tuple(d["breakers"]),
            deactivation_guard=DeactivationGuard.from_wire(d["deactivationGuard"]),
        )


@dataclass(frozen=True)
class Providers:
    """``chains``: channel → account names in failover order; ``lanes``: each
    dispatcher's lanes as it last reported them (``dispatcher``, ``updatedAt``, ``lanes``)."""

    chains: dict[str, tuple[str, ...]]
    accounts: tuple[ProviderAccount, ...]
    lanes: tuple[Json, ...]

    @classmethod
    def from_wire(cls, d: Json) -> Providers:
        chains = {channel: tuple(names) for channel, names in d["chains"].items()}
        accounts = tuple(ProviderAccount.from_wire(a) for a in d["accounts"])
        return cls(chains, accounts, tuple(d.get("lanes", ())))


@dataclass(frozen=True)
class GuardReset:
    """The guard cleared by hand; ``released`` held deliveries made due again."""

    account: str
    released: int
    deactivation_guard: DeactivationGuard

    @classmethod
    def from_wire(cls, d: Json) -> GuardReset:
        guard = DeactivationGuard.from_wire(d["deactivationGuard"])
        return cls(account=d["account"], released=d["released"], deactivation_guard=guard)
