"""The development sink: each message becomes a JSON file under ``outbox/<channel>/``.

The file is named by the delivery id and written atomically, so a repeated send of the same
delivery overwrites its own file: the sink dedupes by delivery id like a real provider
with idempotency keys.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tidings.providers.base import Message, SendResult


class SinkProvider:
    name = "sink"

    def __init__(self, outbox_dir: Path) -> None:
        self.outbox_dir = outbox_dir

    async def send(self, message: Message) -> SendResult:
        await asyncio.to_thread(self._write, message)
        return SendResult(provider=self.name, provider_msg_id=f"sink-{message.delivery_id}")

    def _write(self, message: Message) -> None:
        folder = self.outbox_dir / message.channel.value
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{message.delivery_id}.json"
        temporary = target.with_suffix(".tmp")
        temporary.write_text(json.dumps(_as_json(message), indent=2, sort_keys=True))
        os.replace(temporary, target)

    async def close(self) -> None:
        return None


def _as_json(message: Message) -> dict[str, Any]:
    document = asdict(message)
    document["delivery_id"] = str(message.delivery_id)
    document["notification_id"] = str(message.notification_id)
    document["channel"] = message.channel.value
    document["priority"] = message.priority.value
    document["inbound_at"] = {a: at.isoformat() for a, at in message.inbound_at.items()}
    return document


class NoopProvider:
    """Accepts everything and does nothing: for benchmarks of the dispatcher itself."""

    name = "noop"

    async def send(self, message: Message) -> SendResult:
        return SendResult(provider=self.name, provider_msg_id=None)

    async def close(self) -> None:
        return None
