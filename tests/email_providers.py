"""Shared by the Mailgun and Postmark tests: sending through an adapter with a dispatcher,
reading deliveries back, tidings' API on a real port, and the simulator's import guard."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

import tidings
from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tidings.api.app import create_app
from tidings.providers.base import Provider
from tidings.service import Service
from tidings.simulator.behaviour import ProviderState


async def send_emails(
    client: httpx.AsyncClient, service: Service, provider: Provider, *addresses: str
) -> dict[str, dict[str, Any]]:
    """Accept one email per address, send them all through ``provider``; each delivery (with
    its notification id) by address (the API masks addresses)."""
    await put_type(client, channels=("email",))
    ids = []
    for address in addresses:
        response = await post(client, email_to(address))
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    async with running_dispatcher(service, provider):
        await eventually(lambda: _all_sent(client, ids))
    await provider.close()
    found = {}
    for address, notification_id in zip(addresses, ids, strict=True):
        [item] = (await client.get(f"/v1/notifications/{notification_id}")).json()["deliveries"]
        found[address] = {**item, "notification_id": notification_id}
    return found


async def _all_sent(client: httpx.AsyncClient, ids: list[str]) -> bool:
    for notification_id in ids:
        response = await client.get(f"/v1/notifications/{notification_id}")
        if any(d["status"] != "SENT" for d in response.json()["deliveries"]):
            return False
    return True


async def delivery(client: httpx.AsyncClient, sent: dict[str, Any]) -> dict[str, Any]:
    response = await client.get(f"/v1/notifications/{sent['notification_id']}")
    found: dict[str, Any] = response.json()["deliveries"][0]
    return found


def kinds(item: dict[str, Any]) -> list[str]:
    return [entry["kind"] for entry in item["history"]]


async def suppression(client: httpx.AsyncClient, address: str) -> str | None:
    found = await client.get(f"/v1/suppressions/email/{address}")
    return str(found.json()["reason"]) if found.status_code == 200 else None


@contextlib.asynccontextmanager
async def api_on(service: Service, port: int) -> AsyncIterator[None]:
    """tidings' API on 127.0.0.1:``port``, for a simulator posting its webhooks to it."""
    config = uvicorn.Config(create_app(service), port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started)
        yield
    finally:
        server.should_exit = True
        await task


async def send_one_by_one(
    client: httpx.AsyncClient, state: ProviderState, outcomes: dict[str, str]
) -> list[dict[str, str]]:
    """Send to each address in turn (a dispatcher must be running), the simulator told to
    report its outcome, and wait until every report was posted; the notifications sent."""
    sent = []
    for address, outcome in outcomes.items():
        reports = {} if outcome == "delivered" else {outcome: 1.0}
        state.behaviour = state.behaviour.model_copy(update={"reports": reports})
        before = state.counts["reports_scheduled"]
        response = await post(client, email_to(address))
        assert response.status_code == 202, response.text
        sent.append({"notification_id": response.json()["id"]})
        await eventually(functools.partial(_reported, state, after=before))
    return sent


def _reported(state: ProviderState, after: int) -> bool:
    """More reports scheduled than ``after``, and every one of them posted (or given up)."""
    counts = state.counts
    done = counts["reports_posted"] + counts["reports_failed"]
    scheduled = counts["reports_scheduled"]
    return scheduled > after and done == scheduled and counts["reports_in_flight"] == 0


async def status_is(client: httpx.AsyncClient, notification_id: str, status: str) -> bool:
    response = await client.get(f"/v1/notifications/{notification_id}")
    return all(d["status"] == status for d in response.json()["deliveries"])


def provider_imports(module: str) -> list[str]:
    """The ``tidings.providers`` modules a simulator module imports, at any depth: it must
    read the provider's documentation on its own, not share the adapter's reading."""
    path = Path(tidings.__file__).parent / "simulator" / f"{module}.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # Relative to tidings.simulator: level 1 is the package, level 2 tidings.
            base = ["tidings", "simulator"][: max(0, 3 - node.level)] if node.level else []
            parent = ".".join([*base, *([node.module] if node.module else [])])
            names = [parent] + [f"{parent}.{alias.name}" for alias in node.names]
        found += [name for name in names if name.startswith("tidings.providers")]
    return found
