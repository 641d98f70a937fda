"""docker-compose.yml stays in step with the code: its settings load, its commands exist,
and the fleet it describes is the one the README documents. (No Docker engine runs on the
test machines: the file is checked, not run.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from tidings.cli import app
from tidings.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_the_fleet_has_every_process_and_server() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "kafka", "migrate", "api", "relay", "worker"}
    commands = {
        name: services[name]["command"][0] for name in ("migrate", "api", "relay", "worker")
    }
    assert commands == {"migrate": "migrate", "api": "api", "relay": "relay", "worker": "worker"}


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
