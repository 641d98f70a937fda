"""Running the real ``tidings`` command line in subprocesses, for acceptance and crash tests.

Each process writes its output to a log file (never a pipe, which could fill up and stall it)
and runs in a session of its own, so a terminal's Ctrl-C reaches only the test runner.
``TidingsProcesses`` remembers everything it started and stops it all on exit, whatever
happened in between.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(
    port: int, process: subprocess.Popen[bytes], within: float = 15, log_path: Path | None = None
) -> None:
    """Until something listens on 127.0.0.1:``port``; fails (with the log's tail, if any)
    when ``process`` exits first or nothing listens ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None:
                tail = log_path.read_text()[-2000:] if log_path is not None else ""
                raise RuntimeError(
                    f"{process.args[0]} exited ({process.returncode}): {tail}"
                ) from None
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {within}s")


def run_cli(
    *args: str, cwd: Path, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """One `tidings` command in a child process, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "tidings", *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def tidings_env(**settings: object) -> dict[str, str]:
    """This process's environment without any ``TIDINGS_*`` variable, plus ``settings`` as
    ``TIDINGS_<NAME>`` (dicts and lists as JSON, which pydantic-settings parses)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in settings.items():
        text = json.dumps(value) if isinstance(value, dict | list) else str(value)
        env[f"TIDINGS_{name.upper()}"] = text
    return env


@dataclass
class TidingsProcess:
    """One running ``python -m tidings <args>``."""

    name: str
    args: tuple[str, ...]
    log_path: Path
    popen: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def is_running(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def kill(self, timeout: float = 10.0) -> int:
        """SIGKILL: no handler runs, nothing is flushed or released. Returns the exit code."""
        if self.is_running():
            self.popen.send_signal(signal.SIGKILL)
        return self.popen.wait(timeout)

    async def kill_and_wait(self, timeout: float = 10.0) -> int:
        """SIGKILL, then wait (without blocking the event loop) until the process is gone."""
        if self.is_running():
            self.popen.send_signal(signal.SIGKILL)
        return await self.wait_exit(timeout)

    async def stop_and_wait(self, timeout: float = 15.0) -> int:
        """SIGTERM, then wait (without blocking the event loop) for a graceful exit."""
        if self.is_running():
            self.popen.send_signal(signal.SIGTERM)
        return await self.wait_exit(timeout)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (graceful shutdown), then SIGKILL after ``timeout`` seconds."""
        if self.is_running():
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    async def wait_exit(self, timeout: float) -> int:
        """Wait for the process to exit on its own, without blocking the event loop."""
        deadline = time.monotonic() + timeout
        while (code := self.popen.poll()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} (pid {self.pid}) still running after {timeout}s")
            await asyncio.sleep(0.02)
        return code


@dataclass
class TidingsProcesses:
    """Starts ``tidings`` subprocesses with one environment and working directory."""

    env: Mapping[str, str]
    workdir: Path
    started: list[TidingsProcess] = field(default_factory=list)

    def start(self, name: str, args: Sequence[str]) -> TidingsProcess:
        """Start ``python -m tidings *args``; its output goes to ``<workdir>/<name>-<n>.log``."""
        log_path = self.workdir / f"{name}-{len(self.started)}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                [sys.executable, "-m", "tidings", *args],
                env=dict(self.env),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = TidingsProcess(name, tuple(args), log_path, popen)
        self.started.append(process)
        return process

    def start_api(self, port: int, name: str = "api") -> TidingsProcess:
        return self.start(name, ["api", "--host", "127.0.0.1", "--port", str(port)])

    def start_dispatcher(self, name: str = "dispatch") -> TidingsProcess:
        return self.start(name, ["dispatch"])

    def stop_all(self, timeout: float = 15.0) -> None:
        """Stop every process still running (SIGTERM, then SIGKILL) and reap them all."""
        for process in self.started:
            if process.is_running():
                process.popen.send_signal(signal.SIGTERM)
        for process in self.started:
            process.stop(timeout)


@contextmanager
def tidings_processes(env: Mapping[str, str], workdir: Path) -> Iterator[TidingsProcesses]:
    """``TidingsProcesses`` whose every process is stopped when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    processes = TidingsProcesses(env, workdir)
    try:
        yield processes
    finally:
        processes.stop_all()


async def wait_ready(base_url: str, process: TidingsProcess, timeout: float = 30.0) -> None:
    """Poll ``GET /readyz`` until it answers 200; fail early if ``process`` exits."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    async with httpx.AsyncClient(base_url=base_url, timeout=2.0) as client:
        while time.monotonic() < deadline:
            if not process.is_running():
                raise RuntimeError(
                    f"{process.name} exited with {process.returncode} before it was ready:\n"
                    f"{process.log_tail()}"
                )
            try:
                response = await client.get("/readyz")
            except httpx.TransportError as error:
                last = repr(error)
            else:
                if response.status_code == 200:
                    return
                last = f"{response.status_code} {response.text[:200]}"
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{base_url}/readyz not ready within {timeout}s ({last})")
