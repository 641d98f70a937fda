"""Providers for tests and demos: a scriptable one in memory and a recording one on disk."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from tidings.providers.base import (
    Message,
    PermanentError,
    SendResult,
    TransientError,
)


@dataclass(frozen=True)
class Call:
    delivery_id: uuid.UUID
    address: str
    priority: str
    attempt: int
    started: float
    finished: float | None = None
    outcome: str = "ok"


@dataclass
class Script:
    """How the provider answers one address: fail transiently ``transient_failures`` times,
    then succeed; or always fail permanently; or hang."""

    transient_failures: int = 0
    permanent: bool = False
    hang: bool = False
    retry_after: float | None = None


class ScriptedProvider:
    """In-memory provider that does what a test tells it to and records every call."""

    def __init__(
        self,
        name: str = "scripted",
        delay: float = 0.0,
        scripts: dict[str, Script] | None = None,
    ) -> None:
        self.name = name
        self.delay = delay
        self.scripts = scripts or {}
        self.calls: list[Call] = []
        self.completed: list[Call] = []
        self._failures: Counter[uuid.UUID] = Counter()

    def script(self, address: str, script: Script) -> None:
        self.scripts[address] = script

    async def send(self, message: Message) -> SendResult:
        call = Call(
            message.delivery_id,
            message.address,
            message.priority.value,
            message.attempt,
            time.monotonic(),
        )
        self.calls.append(call)
        script = self.scripts.get(message.address, Script())
        if script.hang:
            await asyncio.Event().wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        outcome = self._outcome(message, script)
        self.completed.append(replace(call, finished=time.monotonic(), outcome=outcome))
        if outcome == "permanent":
            raise PermanentError(f"scripted permanent failure for {message.address}")
        if outcome == "transient":
            raise TransientError("scripted transient failure", retry_after=script.retry_after)
        return SendResult(provider=self.name, provider_msg_id=f"scripted-{message.delivery_id}")

    def _outcome(self, message: Message, script: Script) -> str:
        if script.permanent:
            return "permanent"
        if self._failures[message.delivery_id] < script.transient_failures:
            self._failures[message.delivery_id] += 1
            return "transient"
        return "ok"

    def sends_of(self, delivery_id: uuid.UUID) -> int:
        return sum(1 for call in self.completed if call.delivery_id == delivery_id)

    async def close(self) -> None:
        return None


@dataclass(eq=False)  # compared and hashed by identity, like every provider
class RecordingProvider:
    """Appends one line per send to a file, so a test can count sends across processes
    (the line is in the kernel's page cache once ``write`` returns, so SIGKILL keeps it)."""

    path: Path
    delay: float = 0.0
    name: str = "record"
    _fd: int | None = field(default=None, init=False, repr=False)

    async def send(self, message: Message) -> SendResult:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        line = f"{message.delivery_id} {message.priority.value} {time.time():.6f}\n"
        os.write(self._fd, line.encode())
        return SendResult(provider=self.name, provider_msg_id=f"record-{message.delivery_id}")

    async def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_recording(path: Path) -> list[str]:
    """Delivery ids in the order the recording provider sent them."""
    if not path.exists():
        return []
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
