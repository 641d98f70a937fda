"""``tidings users import FILE``: CSV and JSON Lines profiles sent in batches to a real
``tidings serve``, a progress bar, and a bad line named by its number."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tests.conftest import run_blocking
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tidings.cli.app import app


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("users-cli")
    port = free_port()
    env = tidings_env(database_url=f"sqlite:///{workdir / 'tidings.db'}", secret_key="test")
    with tidings_processes(env, workdir) as processes:
        process = processes.start("serve", ["serve", "--port", str(port)])
        base = f"http://127.0.0.1:{port}"
        run_blocking(wait_ready(base, process))
        yield base
        assert process.stop() == 0, process.log_tail()


def run(url: str, *args: str) -> Any:
    env = {"TIDINGS_URL": url, "COLUMNS": "100", "TIDINGS_API_KEY": ""}
    return CliRunner().invoke(app, ["users", "import", *args], env=env)


def profile(url: str, user_id: str) -> dict[str, Any]:
    answer = httpx.get(f"{url}/v1/users/{user_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_a_csv_is_imported_in_batches_and_again_as_replacements(url: str, tmp_path: Path) -> None:
    lines = ["id,email,phone,plan"] + [
        f"csv-{i:04d},csv{i}@example.com,,{'pro' if i % 2 else ''}" for i in range(2500)
    ]
    path = tmp_path / "users.csv"
    path.write_text("\n".join(lines) + "\n")
    result = run(url, str(path), "--batch", "1000")
    assert result.exit_code == 0, result.output
    assert "2500/2500" in result.output
    assert "imported 2500 users: 2500 created, 0 replaced" in result.output
    assert profile(url, "csv-0001")["attributes"] == {"plan": "pro"}
    assert profile(url, "csv-0002")["attributes"] is None
    assert profile(url, "csv-2499")["email"] == "csv2499@example.com"
    again = run(url, str(path))
    assert "imported 2500 users: 0 created, 2500 replaced" in again.output


def test_jsonl_stops_at_a_bad_line_and_names_it(url: str, tmp_path: Path) -> None:
    rows = [
        {"id": "jl-1", "email": "jl1@example.com", "attributes": {"tier": 3}},
        {"id": "jl-2", "phone": "+15550002222"},
        {"id": "jl-3", "email": "not an address"},
    ]
    path = tmp_path / "users.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n\n" + json.dumps(rows[2]))
    result = run(url, str(path), "--batch", "2")
    assert result.exit_code == 1, result.output
    assert "line 4:" in result.output and "users.0.email" in result.output
    assert "2 imported before it" in result.output
    assert profile(url, "jl-1")["attributes"] == {"tier": 3}
    assert httpx.get(f"{url}/v1/users/jl-3").status_code == 404


def test_other_files_are_refused(url: str, tmp_path: Path) -> None:
    path = tmp_path / "users.txt"
    path.write_text("id\nx\n")
    result = run(url, str(path))
    assert result.exit_code == 1 and "give a .csv or a .jsonl file" in result.output
