"""Fault schedules: what happens to the fleet, and when (seconds from the start of the load).

A schedule is a list of ``Fault``; ``random_schedule`` draws one from a seed (the same seed,
the same schedule), ``trial_schedule`` is the outside trial's sequence (issue 23): relay and
worker SIGKILLs, the broker restarted without its memory, Redis restarted empty, a PostgreSQL
outage, the relays and workers restarted, a second outage."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    KILL = "kill"  # SIGKILL one process; its supervisor starts it again ``seconds`` later
    RESTART = "restart"  # SIGTERM every process of a role (a deploy), then start them again
    BROKER = "broker"  # the broker killed and started again empty, ``seconds`` later
    REDIS = "redis"  # Redis killed and started again empty, ``seconds`` later
    POSTGRES = "postgres"  # PostgreSQL unreachable (connections cut, refused) for ``seconds``


@dataclass(frozen=True, order=True)
class Fault:
    at: float
    kind: Kind
    target: str = ""  # KILL: a process name ("worker-0"); RESTART: a role ("worker")
    seconds: float = 0.0

    def describe(self) -> str:
        what = f"{self.kind.value} {self.target}".strip()
        return f"t={self.at:5.1f}s {what}" + (f" for {self.seconds:.1f}s" if self.seconds else "")


# The processes of each mode: role -> how many.
KAFKA_ROLES = {"api": 1, "relay": 2, "worker": 2}
DIRECT_ROLES = {"api": 1, "serve": 1, "dispatch": 1}  # serve: an API and a dispatcher


def names(roles: dict[str, int]) -> list[str]:
    return [f"{role}-{n}" for role, count in roles.items() for n in range(count)]


def trial_schedule(scale: float = 1.0, outage: float = 15.0) -> list[Fault]:
    """The trial's sequence, its times multiplied by ``scale`` (CI runs it compressed)."""
    return [
        Fault(4 * scale, Kind.KILL, "relay-0", 2.0),
        Fault(7 * scale, Kind.KILL, "worker-0", 2.0),
        Fault(11 * scale, Kind.BROKER, seconds=1.0),
        Fault(16 * scale, Kind.REDIS, seconds=1.0),
        Fault(20 * scale, Kind.POSTGRES, seconds=outage),
        Fault(20 * scale + outage + 4 * scale, Kind.RESTART, "relay"),
        Fault(20 * scale + outage + 5 * scale, Kind.RESTART, "worker"),
        Fault(20 * scale + outage + 14 * scale, Kind.POSTGRES, seconds=outage),
    ]


def random_schedule(
    seed: int,
    duration: float,
    roles: dict[str, int],
    kafka: bool,
    faults: int = 10,
    outage: tuple[float, float] = (10.0, 20.0),
) -> list[Fault]:
    """At least ``faults`` faults at random times in ``duration``: a SIGKILL of each
    process, a Redis restart, a PostgreSQL outage and (Kafka only) a broker restart, each
    at least once, the rest drawn at random among them."""
    rng = random.Random(seed)
    processes = names(roles)
    kinds = [Kind.REDIS, Kind.POSTGRES] + ([Kind.BROKER] if kafka else [])
    each = [(Kind.KILL, name) for name in processes] + [(kind, "") for kind in kinds]
    chosen: list[Fault] = []
    for n in range(max(faults, len(each))):
        at = round(rng.uniform(2.0, duration), 1)
        kind, target = each[n] if n < len(each) else (rng.choice([*kinds, Kind.KILL]), "")
        if kind is Kind.KILL:
            target = target or rng.choice(processes)
            chosen.append(Fault(at, kind, target, round(rng.uniform(0.5, 5.0), 1)))
            continue
        if kind is Kind.POSTGRES:
            chosen.append(Fault(at, kind, seconds=round(rng.uniform(*outage), 1)))
        else:
            chosen.append(Fault(at, kind, seconds=round(rng.uniform(0.5, 3.0), 1)))
    return sorted(chosen)
