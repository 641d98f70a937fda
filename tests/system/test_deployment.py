"""docker-compose.yml stays in step with the code: its settings load, its commands exist,
and the fleet it describes is the one the README documents. (No Docker engine runs on the
test machines: the file is checked, not run.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from tests.processes import free_port, run_cli, tidings_env, tidings_processes, wait_ready
from tidings.cli.app import app
from tidings.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_the_fleet_has_every_process_and_server() -> None:
    services = compose()["services"]
    processes = ("migrate", "first-key", "api", "relay", "worker")
    assert set(services) == {"postgres", "redis", "kafka", *processes}
    commands = {name: services[name]["command"][0] for name in processes}
    assert commands == {
        "migrate": "migrate",
        "first-key": "keys",
        "api": "api",
        "relay": "relay",
        "worker": "worker",
    }


def test_its_settings_are_valid_kafka_settings(monkeypatch: Any) -> None:
    for name, value in compose()["services"]["relay"]["environment"].items():
        monkeypatch.setenv(name, str(value))
    settings = Settings()
    assert settings.transport == "kafka"
    assert settings.kafka_bootstrap == "kafka:9092"
    assert settings.redis_url and settings.database_url.startswith("postgresql://")


def test_every_command_it_runs_exists() -> None:
    runner = CliRunner()
    for command in ("migrate", "api", "relay", "worker"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0, result.output


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, (NAME, arguments), continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    found = [line.split(maxsplit=1) for line in lines if line and not line.startswith("#")]
    return [(parts[0].upper(), parts[1] if len(parts) > 1 else "") for parts in found]


def test_the_image_runs_as_an_unprivileged_user() -> None:
    users = [args for name, args in dockerfile() if name == "USER"]
    assert users, "no USER: the processes would run as root"
    assert users[-1].split(":")[0] not in ("root", "0"), users


def test_the_image_checks_the_apis_health(tmp_path: Path) -> None:
    """The image's HEALTHCHECK command passes against a running API and fails without one;
    the processes that have no API turn it off."""
    checks = [args for name, args in dockerfile() if name == "HEALTHCHECK"]
    assert len(checks) == 1, checks
    command = json.loads(checks[0][checks[0].index("CMD") + 3 :])
    assert command[0] == "python"
    port = free_port()
    env = {**tidings_env(), "TIDINGS_PORT": str(port)}
    check = [sys.executable, *command[1:]]
    assert subprocess.run(check, env=env, capture_output=True, check=False).returncode != 0
    with tidings_processes(tidings_env(), tmp_path) as processes:
        asyncio.run(
            wait_ready(
                f"http://127.0.0.1:{port}", processes.start("serve", ["serve", "--port", str(port)])
            )
        )
        assert subprocess.run(check, env=env, capture_output=True, check=False).returncode == 0
    services = compose()["services"]
    for name in ("migrate", "first-key", "relay", "worker"):
        assert services[name]["healthcheck"] == {"disable": True}, name
    assert "healthcheck" not in services["api"]


def test_the_api_on_every_interface_starts_with_a_key_made_first(tmp_path: Path) -> None:
    """The api serves 0.0.0.0, which needs a key: it waits for `first-key`, whose command
    makes one on a new database (and prints it), and nothing, successfully, after that."""
    services = compose()["services"]
    assert services["api"]["command"][:3] == ["api", "--host", "0.0.0.0"]
    assert "--no-auth" not in services["api"]["command"]
    waits = services["api"]["depends_on"]
    assert waits["first-key"] == {"condition": "service_completed_successfully"}
    assert services["first-key"]["depends_on"]["migrate"] == {
        "condition": "service_completed_successfully"
    }
    env = tidings_env(database_url=f"sqlite:///{tmp_path / 'fleet.db'}")
    migrated = run_cli("migrate", cwd=tmp_path, env=env)
    assert migrated.returncode == 0, migrated.stderr
    first = run_cli(*services["first-key"]["command"], cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.startswith("tdk_"), first.stdout
    again = run_cli(*services["first-key"]["command"], cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "tdk_" not in again.stdout and "none created" in again.stderr
