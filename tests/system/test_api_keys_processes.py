"""API keys through `tidings` processes: `keys create`, `serve` on a network address or on
loopback; the keys' other tests are in tests/integration/test_api_keys.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from pathlib import Path

import pytest

from tests.integration.test_api_keys import dead_letters, every_cell, on_network
from tests.processes import (
    TidingsProcess,
    free_port,
    tidings_env,
    tidings_processes,
    wait_ready,
)
from tests.system.test_cli import run_cli
from tidings.api.auth import (
    SHOWN_CHARS,
)
from tidings.settings import Settings


async def assert_refused(process: TidingsProcess) -> None:
    """``process`` exits, refusing to serve a network address without keys."""
    assert await process.wait_exit(60) == 1, process.log_tail()
    log = process.log()
    assert "refusing to serve 0.0.0.0" in log and "--no-auth" in log, log


def created_key(env: dict[str, str], cwd: Path, *args: str) -> str:
    """The key ``tidings keys create *args`` prints (its first line)."""
    made = run_cli("keys", "create", *args, cwd=cwd, env=env)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[0]
    assert key.startswith("tdk_"), made.stdout
    return key


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_key_opens_a_network_address_until_it_is_revoked(
    database_url: str, tmp_path: Path
) -> None:
    """Once a key exists, `tidings serve` and `tidings api` start on a network address and
    answer only with a key; `tidings keys revoke` has both refuse it within
    api_key_refresh_seconds, and `tidings keys list` shows it revoked, never the key."""
    env = tidings_env(database_url=database_url)
    key = created_key(env, tmp_path, "--name", "ops", "--scopes", "all")
    serve_port, api_port = free_port(), free_port()
    with tidings_processes(env, tmp_path / "processes") as processes:
        bases = {
            f"http://127.0.0.1:{serve_port}": processes.start(
                "serve", ["serve", *on_network(serve_port)]
            ),
            f"http://127.0.0.1:{api_port}": processes.start("api", ["api", *on_network(api_port)]),
        }
        await asyncio.gather(*(wait_ready(base, process) for base, process in bases.items()))
        for base, process in bases.items():
            assert await dead_letters(base, None) == 401, process.name
            assert await dead_letters(base, key) == 200, process.name

        # The commands that call the API send TIDINGS_API_KEY.
        status = ["status", str(uuid.uuid4()), "--url", next(iter(bases))]
        without, with_key = await asyncio.gather(
            asyncio.to_thread(run_cli, *status, cwd=tmp_path, env=env),
            asyncio.to_thread(run_cli, *status, cwd=tmp_path, env={**env, "TIDINGS_API_KEY": key}),
        )
        assert without.returncode == 1 and "401" in without.stdout + without.stderr
        assert "404" in with_key.stdout + with_key.stderr, with_key

        revoked = run_cli("keys", "revoke", "ops", cwd=tmp_path, env=env)
        assert revoked.returncode == 0 and "revoked 'ops'" in revoked.stdout, revoked
        # Each process last read the keys before the revoke (no request since), and reads
        # them again for a request api_key_refresh_seconds later; the listing meanwhile.
        listed, _ = await asyncio.gather(
            asyncio.to_thread(run_cli, "keys", "list", "--json", cwd=tmp_path, env=env),
            asyncio.sleep(Settings.model_fields["api_key_refresh_seconds"].default),
        )
        for base, process in bases.items():
            assert await dead_letters(base, key) == 401, process.name

    assert listed.returncode == 0, listed.stderr
    assert key not in listed.stdout and key[SHOWN_CHARS:] not in listed.stdout
    [ops] = json.loads(listed.stdout)
    assert ops["name"] == "ops" and ops["revokedAt"] is not None, ops


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_network_address_without_keys_needs_no_auth(
    database_url: str, tmp_path: Path
) -> None:
    """`tidings serve` and `tidings api` refuse an address other than loopback while no key
    exists, and serve it to anyone with --no-auth (behind a gateway that authenticates)."""
    env = tidings_env(database_url=database_url)  # migrated, as `tidings api` expects
    ports = [free_port() for _ in range(4)]
    with tidings_processes(env, tmp_path) as processes:
        refusing = [
            processes.start("serve-open", ["serve", *on_network(ports[0])]),
            processes.start("api-open", ["api", *on_network(ports[1])]),
        ]
        bases = {
            f"http://127.0.0.1:{ports[2]}": processes.start(
                "serve", ["serve", *on_network(ports[2], "--no-auth")]
            ),
            f"http://127.0.0.1:{ports[3]}": processes.start(
                "api", ["api", *on_network(ports[3], "--no-auth")]
            ),
        }
        await asyncio.gather(*(assert_refused(process) for process in refusing))
        await asyncio.gather(*(wait_ready(base, process) for base, process in bases.items()))
        for base, process in bases.items():
            assert "--no-auth: serving 0.0.0.0" in process.log(), process.name
            assert await dead_letters(base, None) == 200, process.name


@pytest.mark.slow
async def test_serve_on_loopback_says_it_is_open(tmp_path: Path) -> None:
    port = free_port()
    with tidings_processes(tidings_env(), tmp_path) as processes:
        server = processes.start("serve", ["serve", "--port", str(port)])
        await wait_ready(f"http://127.0.0.1:{port}", server)
        assert "no API keys exist: every request to 127.0.0.1" in server.log()


async def test_the_database_holds_only_a_hash_of_a_key(database_url: str, tmp_path: Path) -> None:
    """What `tidings keys create` prints is in no column of the api_key table: its SHA-256
    is, and the first characters that listings show, nothing of the rest."""
    env = tidings_env(database_url=database_url)
    key = created_key(env, tmp_path, "--name", "orders", "--scopes", "send,read")
    cells = await every_cell(database_url, "api_key")
    assert hashlib.sha256(key.encode()).hexdigest() in cells
    assert key[:SHOWN_CHARS] in cells
    unshown = key[SHOWN_CHARS:]
    pieces = {unshown[i : i + SHOWN_CHARS] for i in range(len(unshown) - SHOWN_CHARS + 1)}
    assert [cell for cell in cells if key in cell or any(p in cell for p in pieces)] == []
