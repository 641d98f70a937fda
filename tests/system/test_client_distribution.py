"""The ``tidings-client`` distribution (clients/python/) installs without the server and
works: its wheel is built from this repository, installed with its dependencies and
nothing else into a fresh virtual environment (``--no-index``: only the wheels built
here), and a script there sends through a running ``tidings serve`` (SQLite)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_blocking
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = ("tidings", "fastapi", "sqlalchemy", "uvicorn", "pydantic", "alembic", "jinja2")

SCRIPT = """
import asyncio, importlib.util, json, sys, time
absent = [m for m in sys.argv[2].split(",") if importlib.util.find_spec(m) is not None]
from tidings_client import AsyncClient, Client, Notification, Recipient, TypeDefinition

with Client(sys.argv[1]) as client:
    client.put_type("dist.hello", TypeDefinition("transactional", "normal", ["email"]))
    client.put_template("dist.hello", "email", "en", subject="Hi", text="Hi {{ name }}")
    sent = client.send(Notification("dist.hello", to=Recipient(email="ana@example.com"),
                                    data={"name": "Ana"}, business_id="dist-1"))
    for _ in range(500):
        status = client.get_notification(sent.id).deliveries[0].status
        if status in ("SENT", "FAILED", "SKIPPED"):
            break
        time.sleep(0.05)
    device = client.register_device("ana", "web", "dist-token")

async def topics() -> int:
    async with AsyncClient(sys.argv[1]) as client:
        return (await client.subscribe("dist-topic", ["ana", "bob"])).subscribers

print(json.dumps({"present": absent, "status": status, "device": device.token,
                  "subscribers": asyncio.run(topics())}))
"""


def _run(*args: str | Path, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's wheel and its dependencies' wheels, from the machine's configured
    package index (as ``make install`` uses it); the build needs only hatchling, which
    the development install holds."""
    folder = tmp_path_factory.mktemp("wheels")
    pip = (sys.executable, "-m", "pip")
    _run(*pip, "wheel", "--no-build-isolation", "-q", "-w", folder, ROOT / "clients/python")
    return folder


@pytest.fixture(scope="module")
def venv(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("venv") / "v"
    _run(sys.executable, "-m", "venv", home)
    python = home / "bin/python"
    only_these = ("--no-index", "--find-links", wheels)
    _run(python, "-m", "pip", "install", "-q", *only_these, "tidings-client")
    return python


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("dist-server")
    port = free_port()
    env = tidings_env(database_url=f"sqlite:///{workdir / 'tidings.db'}", secret_key="s")
    with tidings_processes(env, workdir) as processes:
        process = processes.start("serve", ["serve", "--port", str(port)])
        served = f"http://127.0.0.1:{port}"
        run_blocking(wait_ready(served, process))
        yield served
        assert process.stop() == 0, process.log_tail()


def test_the_wheel_is_the_client_alone_and_typed(wheels: Path) -> None:
    (wheel,) = wheels.glob("tidings_client-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"tidings_client"}
    assert "tidings_client/py.typed" in names
    assert not any("__pycache__" in n for n in names)


def test_it_installs_without_the_server_and_talks_to_a_running_tidings(
    venv: Path, url: str
) -> None:
    answer = json.loads(_run(venv, "-c", SCRIPT, url, ",".join(SERVER_ONLY)))
    assert answer == {
        "present": [],
        "status": "SENT",
        "device": "dist-token",
        "subscribers": 2,
    }
    installed = _run(venv, "-m", "pip", "list", "--format=json")
    names = {p["name"].lower() for p in json.loads(installed)}
    assert {"tidings-client", "httpx"} <= names
    assert not names & {"tidings", "fastapi", "sqlalchemy", "uvicorn"}
