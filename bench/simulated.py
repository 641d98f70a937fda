"""The simulator's SendGrid, with a fixed latency per request, as a ``tidings simulate``
subprocess (its CPU is not the bench process's), and tidings' settings sending to it.

The account is given a rate far above what one dispatcher reaches, and the simulator's
SendGrid no limit at all: rate limits are not what this row measures.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from bench.api_server import _spawn, _stop, _wait_ready, free_port
from tidings.providers.sendgrid import SendGridAccount
from tidings.settings import Settings

SENDGRID_KEY = "SG.bench-simulator-key"
ACCOUNT = "sendgrid-sim"
ACCOUNT_RATE = 100_000.0  # sends/s: the limiter runs, and never holds a send back


def _simulator_toml(latency_ms: float) -> str:
    # tidings_url "": the simulator posts no Event Webhook (nothing listens for it here).
    return (
        f'sendgrid_api_key = "{SENDGRID_KEY}"\ntidings_url = ""\n\n'
        f"[behaviours.sendgrid]\nlatency_ms = {latency_ms}\n"
    )


@contextlib.asynccontextmanager
async def running_simulator(
    scratch: Path, latency_ms: float, database_url: str
) -> AsyncIterator[str]:
    """``tidings simulate`` on free ports; yields its base URL, stops it on exit."""
    config = scratch / "simulator.toml"
    config.write_text(_simulator_toml(latency_ms))
    port, log = free_port(), scratch / "simulator.log"
    args = ["simulate", "--config", str(config), "--http-port", str(port)]
    args += ["--smtp-port", str(free_port()), "--credentials-dir", str(scratch / "sim-keys")]
    process = _spawn(args, database_url, log)
    url = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(url, process, log, probe="/_sim/counts", name="tidings simulate")
        yield url
    finally:
        _stop(process)


async def forget(url: str) -> None:
    """Empty the simulator's records between runs (it keeps every message it accepts)."""
    async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
        (await client.post("/_sim/reset")).raise_for_status()


async def set_latency(url: str, latency_ms: float) -> None:
    """The simulated SendGrid's latency per request from now on."""
    async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
        answer = await client.patch("/_sim/sendgrid/behaviour", json={"latency_ms": latency_ms})
        answer.raise_for_status()


def account(url: str, in_flight: int) -> SendGridAccount:
    return SendGridAccount(
        api_key=SecretStr(SENDGRID_KEY),
        base_url=url,
        from_email="noreply@tidings.example.com",
        rate_per_second=ACCOUNT_RATE,
        max_in_flight=in_flight,  # its connection pool: as many as the lane has in flight
        timeout=30,
    )


def sendgrid_settings(base: Settings, url: str, in_flight: int) -> Settings:
    """``base`` with email sent through the simulator's SendGrid."""
    return base.model_copy(
        update={
            "accounts": {ACCOUNT: account(url, in_flight)},
            "providers": {**base.providers, "email": [ACCOUNT]},
        }
    )


def dispatch_env(settings: Settings) -> dict[str, str]:
    """TIDINGS_* variables giving a ``tidings dispatch`` subprocess ``settings``' lanes,
    accounts and chains (JSON, as pydantic-settings reads complex fields)."""
    accounts = {
        name: {**acct.model_dump(mode="json"), **_secrets(acct)}
        for name, acct in settings.accounts.items()
    }
    return {
        "TIDINGS_LANES": settings.lanes.model_dump_json(),
        "TIDINGS_ACCOUNTS": json.dumps(accounts),
        "TIDINGS_PROVIDERS": json.dumps(settings.providers),
    }


def _secrets(acct: Any) -> dict[str, str]:
    """Secret fields in clear (model_dump masks them)."""
    return {
        name: value.get_secret_value()
        for name, value in vars(acct).items()
        if isinstance(value, SecretStr)
    }
