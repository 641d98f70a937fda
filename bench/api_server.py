"""``tidings api`` as a subprocess on a free port against the bench database."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _env(database_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env.update(TIDINGS_DATABASE_URL=database_url, TIDINGS_LOG_LEVEL="WARNING", **(extra or {}))
    return env


@contextlib.asynccontextmanager
async def running_api(
    database_url: str, log_path: Path, env: dict[str, str] | None = None
) -> AsyncIterator[str]:
    """Start ``tidings api``, wait until it is ready, yield its base URL; stop it on exit.
    ``env``: more TIDINGS_* settings for it."""
    async with api_process(database_url, log_path, env) as (base_url, _process):
        yield base_url


@contextlib.asynccontextmanager
async def api_process(
    database_url: str, log_path: Path, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """As ``running_api``, yielding the process too (its pid, for its memory)."""
    port = free_port()
    args = ["api", "--host", "127.0.0.1", "--port", str(port)]
    process = _spawn(args, database_url, log_path, env)
    base_url = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(base_url, process, log_path)
        yield base_url, process
    finally:
        _stop(process)


def _spawn(
    args: list[str], database_url: str, log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m tidings *args``, its output to ``log_path`` (never a pipe that could fill)."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tidings", *args],
            env=_env(database_url, env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def _wait_ready(
    base_url: str,
    process: subprocess.Popen[bytes],
    log_path: Path,
    timeout: float = 30.0,
    probe: str = "/readyz",
    name: str = "tidings api",
) -> None:
    """Until ``probe`` answers 200; the log's tail if the process exits or never does."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=base_url, timeout=2.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited early:\n{_tail(log_path)}")
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(probe)).status_code == 200:
                    return
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{name} not ready within {timeout}s:\n{_tail(log_path)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
