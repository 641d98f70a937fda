"""The command line as a new user meets it: --help, serve, send, status, migrate."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tests.helpers import eventually
from tests.processes import free_port, run_cli, tidings_env, tidings_processes, wait_ready
from tidings.cli.app import app

COMMANDS = [
    "serve",
    "api",
    "dispatch",
    "migrate",
    "send",
    "status",
    "dlq",
    "templates",
    "simulate",
    "providers",
    "campaign",
    "cancel",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


@pytest.mark.parametrize("command", ["list", "replay"])
def test_dlq_commands_have_help(command: str) -> None:
    result = CliRunner().invoke(app, ["dlq", command, "--help"])
    assert result.exit_code == 0, result.output


def test_top_level_help_lists_the_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output


def test_migrate_creates_the_default_sqlite_database(tmp_path: Path) -> None:
    result = run_cli("migrate", cwd=tmp_path, env=tidings_env())
    assert result.returncode == 0, result.stderr
    assert "schema at revision" in result.stdout
    assert (tmp_path / "tidings.db").exists()


@pytest.mark.slow
async def test_serve_sends_a_curl_posted_notification_to_the_outbox(tmp_path: Path) -> None:
    """The README's first steps: serve on the defaults, register a type, POST, see the file."""
    port = free_port()
    env = tidings_env()  # the defaults: ./tidings.db and ./outbox in the working directory
    base = f"http://127.0.0.1:{port}"
    with tidings_processes(env, tmp_path) as processes:
        server = processes.start("serve", ["serve", "--port", str(port)])
        await wait_ready(base, server)
        async with httpx.AsyncClient(base_url=base) as client:
            kind = {"category": "transactional", "priority": "normal", "channels": ["email"]}
            assert (await client.put("/v1/types/order.confirmed", json=kind)).status_code == 201
            template = {"subject": "Order {{ order }}", "text": "Thanks for order {{ order }}."}
            url = "/v1/templates/order.confirmed/email/en"
            assert (await client.put(url, json=template)).status_code == 201
            response = await client.post(
                "/v1/notifications",
                headers={"Idempotency-Key": "order-42"},
                json={
                    "type": "order.confirmed",
                    "to": {"email": "ana@example.com"},
                    "data": {"order": 42},
                },
            )
            assert response.status_code == 202
            delivery_id = response.json()["deliveries"][0]["id"]
            written = tmp_path / "outbox" / "email" / f"{delivery_id}.json"
            await eventually(written.exists, within=1.0, interval=0.01)
            message = json.loads(written.read_text())
            assert (message["address"], message["data"]) == ("ana@example.com", {"order": 42})
            url = f"/v1/notifications/{response.json()['id']}"

            async def shown_sent() -> bool:
                shown = (await client.get(url)).json()
                return bool(shown["deliveries"][0]["status"] == "SENT")

            await eventually(shown_sent, within=1.0)

        sent = run_cli(
            "send",
            "--type",
            "order.confirmed",
            "--email",
            "bob@example.com",
            "--data",
            '{"order": 43}',
            "--url",
            base,
            cwd=tmp_path,
            env=env,
        )
        assert sent.returncode == 0, sent.stdout + sent.stderr
        notification_id = sent.stdout.strip()

        async def shows_sent() -> bool:
            status = run_cli(
                "status", notification_id, "--json", "--url", base, cwd=tmp_path, env=env
            )
            return json.loads(status.stdout)["deliveries"][0]["status"] == "SENT"

        await eventually(shows_sent, within=10)
        table = run_cli("status", notification_id, "--url", base, cwd=tmp_path, env=env)
        assert "SENT" in table.stdout and "b***@example.com" in table.stdout

        await _cancel_a_workflow(base, tmp_path, env)
        _apply_templates_from_files(tmp_path, base, env)
        shown = run_cli("providers", "--url", base, cwd=tmp_path, env=env)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "email: sink" in shown.stdout and "closed" in shown.stdout

        refused = run_cli(
            "send",
            "--type",
            "nope",
            "--email",
            "a@example.com",
            "--url",
            base,
            cwd=tmp_path,
            env=env,
        )
        assert refused.returncode == 1
        assert "unknown_type" in refused.stdout
        assert server.stop() == 0


async def _cancel_a_workflow(base: str, tmp_path: Path, env: dict[str, str]) -> None:
    """`tidings send --cancel-key`, then `tidings cancel`: the count, once."""
    kind = {
        "category": "reminder",
        "priority": "normal",
        "channels": ["email"],
        "workflow": [{"wait": "1h"}, {"send": "email"}],
    }
    async with httpx.AsyncClient(base_url=base) as client:
        assert (await client.put("/v1/types/pay.reminder", json=kind)).status_code == 201
        template = {"subject": "Pay", "text": "Please pay."}
        url = "/v1/templates/pay.reminder/email/en"
        assert (await client.put(url, json=template)).status_code == 201
    sent = run_cli(
        "send",
        "--type",
        "pay.reminder",
        "--email",
        "bob@example.com",
        "--cancel-key",
        "invoice-9",
        "--url",
        base,
        cwd=tmp_path,
        env=env,
    )
    assert sent.returncode == 0, sent.stdout + sent.stderr
    first = run_cli("cancel", "invoice-9", "--url", base, cwd=tmp_path, env=env)
    assert (first.returncode, first.stdout.strip()) == (0, "1"), first.stderr
    again = run_cli("cancel", "invoice-9", "--url", base, cwd=tmp_path, env=env)
    assert again.stdout.strip() == "0"


def _apply_templates_from_files(tmp_path: Path, base: str, env: dict[str, str]) -> None:
    """``tidings templates apply``: new versions, unchanged files, and a refused one."""
    folder = tmp_path / "templates" / "order.confirmed"
    folder.mkdir(parents=True)
    (folder / "email.pt-BR.toml").write_text(
        'subject = "Pedido {{ order }}"\ntext = """\nObrigado pelo pedido {{ order }}.\n"""\n'
    )
    applied = run_cli(
        "templates", "apply", str(folder.parent), "--url", base, cwd=tmp_path, env=env
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "version 1 (new version)" in applied.stdout
    again = run_cli("templates", "apply", str(folder.parent), "--url", base, cwd=tmp_path, env=env)
    assert "version 1 (unchanged)" in again.stdout
    shown = httpx.get(f"{base}/v1/templates/order.confirmed/email/pt-BR").json()
    assert shown["versions"][0]["text"] == "Obrigado pelo pedido {{ order }}.\n"
    (folder / "sms.en.toml").write_text('text = "{{ order.__class__ }}"\n')
    refused = run_cli(
        "templates", "apply", str(folder.parent), "--url", base, cwd=tmp_path, env=env
    )
    assert refused.returncode == 1
    assert "sms.en.toml: 422" in refused.stdout.replace("\n", "")


def test_send_reports_bad_json_and_unreachable_api(tmp_path: Path) -> None:
    env = tidings_env()
    bad = run_cli("send", "--type", "t", "--data", "{oops", cwd=tmp_path, env=env)
    assert bad.returncode == 1 and "--data is not valid JSON" in bad.stdout
    port = free_port()
    down = run_cli(
        "send", "--type", "t", "--url", f"http://127.0.0.1:{port}", cwd=tmp_path, env=env
    )
    assert down.returncode == 1 and "cannot reach" in down.stdout


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["serve"], ["--port PORT", "[default: 8000]", "--host HOST", "[default: 127.0.0.1]"]),
        (["status"], ["status [OPTIONS] NOTIFICATION_ID", "--json  "]),
        (["dlq", "replay"], ["replay [OPTIONS] DELIVERY_ID..."]),
        (["dlq", "list"], ["--limit N", "[default: 100]", "--json"]),
        (["simulate"], ["--http-port PORT", "[default: 9900]", "[default: 2525]"]),
    ],
)
def test_help_shows_defaults_and_readable_names(command: list[str], shown: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    for text in shown:
        assert text in result.output
    for unreadable in ("<bool>", "<str>", "<int>", "{", " on ."):
        assert unreadable not in result.output


@pytest.mark.slow
async def test_dead_letter_ids_are_whole_at_80_columns_and_listings_speak_json(
    tmp_path: Path,
) -> None:
    """A poison delivery in the dead-letter queue: its id, listed in a narrow terminal,
    can be copied into `dlq replay`; every listing has --json."""
    port = free_port()
    env = tidings_env() | {"COLUMNS": "80"}
    base = f"http://127.0.0.1:{port}"
    with tidings_processes(env, tmp_path) as processes:
        server = processes.start("serve", ["serve", "--port", str(port)])
        await wait_ready(base, server)
        async with httpx.AsyncClient(base_url=base) as client:
            kind = {"category": "transactional", "priority": "normal", "channels": ["email"]}
            await client.put("/v1/types/greeting", json=kind)
            template = {"subject": "Hi", "text": "Hello {{ name }}"}  # no name: poison
            await client.put("/v1/templates/greeting/email/en", json=template)
            response = await client.post(
                "/v1/notifications",
                headers={"Idempotency-Key": "poison-1"},
                json={"type": "greeting", "to": {"email": "ana@example.com"}, "data": {}},
            )
            delivery_id = response.json()["deliveries"][0]["id"]

        def listed() -> list[dict[str, object]]:
            shown = run_cli("dlq", "list", "--json", "--url", base, cwd=tmp_path, env=env)
            assert shown.returncode == 0, shown.stdout + shown.stderr
            return list(json.loads(shown.stdout))

        await eventually(lambda: [d["id"] for d in listed()] == [delivery_id], within=10)
        table = run_cli("dlq", "list", "--url", base, cwd=tmp_path, env=env)
        assert max(len(line) for line in table.stdout.splitlines()) <= 80
        assert delivery_id in table.stdout.split()
        replayed = run_cli("dlq", "replay", delivery_id, "--url", base, cwd=tmp_path, env=env)
        assert replayed.returncode == 0, replayed.stdout

        shown = run_cli("providers", "--json", "--url", base, cwd=tmp_path, env=env)
        assert json.loads(shown.stdout)["chains"]["email"] == ["sink"]
        [dispatcher] = {
            b["dispatcher"] for a in json.loads(shown.stdout)["accounts"] for b in a["breakers"]
        }
        table = run_cli("providers", "--url", base, cwd=tmp_path, env=env)
        assert max(len(line) for line in table.stdout.splitlines()) <= 80
        assert f"dispatcher {dispatcher}" in table.stdout.splitlines()
        assert server.stop() == 0
