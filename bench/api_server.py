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


def _env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env.update(TIDINGS_DATABASE_URL=database_url, TIDINGS_LOG_LEVEL="WARNING")
    return env


@contextlib.asynccontextmanager
async def running_api(database_url: str, log_path: Path) -> AsyncIterator[str]:
    """Start ``tidings api``, wait until it is ready, yield its base URL; stop it on exit."""
    port = free_port()
    process = _spawn(["api", "--host", "127.0.0.1", "--port", str(port)], database_url, log_path)
    base_url = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(base_url, process, log_path)
        yield base_url
    finally:
        _stop(process)


def _spawn(args: list[str], database_url: str, log_path: Path) -> subprocess.Popen[bytes]:
    """``python -m tidings *args``, its output to ``log_path`` (never a pipe that could fill)."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tidings", *args],
            env=_env(database_url),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def _wait_ready(
    base_url: str, process: subprocess.Popen[bytes], log_path: Path, timeout: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=base_url, timeout=2.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"tidings api exited early:\n{_tail(log_path)}")
            with contextlib.suppress(httpx.TransportError):
                if (await client.get("/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.05)
    raise TimeoutError(f"tidings api not ready within {timeout}s:\n{_tail(log_path)}")


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
