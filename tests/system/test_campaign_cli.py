"""``tidings campaign``: help, client-side checks, how answers and errors are printed (against
a stand-in API), and the whole command line against a real ``tidings serve``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from tests.helpers import eventually
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tidings.cli import campaigns as campaign_cli
from tidings.cli.app import app

SUBCOMMANDS = ["create", "dry-run", "status", "cancel", "list"]
CAMPAIGN_ID = "01a230d8-86f3-75e2-8dfa-aade46dbfad9"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["campaign", *args], env={"COLUMNS": "100"})


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_campaign_command_has_help(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output and "--url URL" in result.output
    for unreadable in ("<bool>", "<str>", "<int>", " on ."):
        assert unreadable not in result.output


def test_campaign_help_lists_its_commands() -> None:
    result = invoke("--help")
    assert result.exit_code == 0, result.output
    for command in SUBCOMMANDS:
        assert command in result.output


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (
            ["create"],
            [
                "--type TYPE",
                "--topic TOPIC",
                "--user ID",
                "--segment JSON",
                "--spread-over DURATION",
                "--local-time HH:MM",
                "--key KEY",
                "[default: random]",
                "[default: low]",
                "[default: UTC]",
            ],
        ),
        (["status"], ["status [OPTIONS] CAMPAIGN_ID", "--watch", "--json"]),
        (["cancel"], ["cancel [OPTIONS] CAMPAIGN_ID"]),
        (["list"], ["--limit N", "[default: 50]", "--after CURSOR", "--json"]),
    ],
)
def test_help_shows_defaults_and_readable_names(command: list[str], shown: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    for text in shown:
        assert text in result.output


def test_create_and_dry_run_take_the_same_options() -> None:
    def options(name: str) -> list[str]:
        (command,) = [c for c in app.registered_groups if c.name == "campaign"]
        group = command.typer_instance
        assert group is not None
        (found,) = [c for c in group.registered_commands if c.name == name]
        assert found.callback is not None
        return list(found.callback.__annotations__)

    assert options("create") == options("dry-run")
    assert {"topic", "user", "segment", "spread_over", "local_time", "key"} <= set(
        options("create")
    )


# Against a stand-in API: what goes out, and how answers and errors are printed.

Handler = Callable[[httpx.Request], httpx.Response]


@dataclass
class StandIn:
    """Answers the command line's HTTP requests with ``answer``; remembers each request."""

    answer: Handler = lambda _request: httpx.Response(500)
    seen: list[httpx.Request] = field(default_factory=list)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    stand_in = StandIn()

    def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
        kwargs.pop("timeout", None)
        with httpx.Client(transport=httpx.MockTransport(stand_in.answer)) as client:
            answer = client.request(method, url, **kwargs)
        stand_in.seen.append(answer.request)
        return answer

    monkeypatch.setattr(httpx, "request", request)
    return stand_in


def test_create_sends_the_options_as_the_api_body(api: StandIn) -> None:
    api.answer = lambda r: httpx.Response(
        202, json={"campaignId": CAMPAIGN_ID, "status": "SCHEDULED"}
    )
    result = invoke(
        "create",
        "--type",
        "spring.sale",
        "--segment",
        '{"field": "city", "equals": "Recife"}',
        "--name",
        "Spring",
        "--data",
        '{"pct": 20}',
        "--channel",
        "email",
        "--channel",
        "push",
        "--priority",
        "normal",
        "--send-at",
        "2030-01-01T10:00:00Z",
        "--spread-over",
        "30m",
        "--timezone",
        "America/Recife",
        "--key",
        "spring-1",
    )
    assert result.exit_code == 0, result.output
    assert f"campaign {CAMPAIGN_ID} SCHEDULED" in result.output
    (sent,) = api.seen
    assert (sent.method, sent.url.path, sent.url.query) == ("POST", "/v1/campaigns", b"")
    assert sent.headers["Idempotency-Key"] == "spring-1"
    assert json.loads(sent.content) == {
        "type": "spring.sale",
        "audience": {"segment": {"field": "city", "equals": "Recife"}},
        "name": "Spring",
        "data": {"pct": 20},
        "channels": ["email", "push"],
        "priority": "normal",
        "sendAt": "2030-01-01T10:00:00Z",
        "spreadOver": "30m",
        "timezone": "America/Recife",
    }


def test_create_makes_up_a_key_and_prints_it(api: StandIn) -> None:
    api.answer = lambda r: httpx.Response(
        202, json={"campaignId": CAMPAIGN_ID, "status": "SCHEDULED"}
    )
    result = invoke(
        "create", "--type", "t", "--user", "ana", "--user", "bo", "--local-time", "10:00"
    )
    assert result.exit_code == 0, result.output
    (sent,) = api.seen
    assert f"Idempotency-Key: {sent.headers['Idempotency-Key']}" in result.output
    body = json.loads(sent.content)
    assert body["audience"] == {"userIds": ["ana", "bo"]} and body["localTime"] == "10:00"


def test_dry_run_prints_channels_and_a_histogram(api: StandIn) -> None:
    buckets = [{"start": f"2030-01-01T10:{m:02d}:00Z", "count": m % 7} for m in range(50)]
    forecast = {
        "dryRun": True,
        "audienceSize": 4,
        "channels": [
            {
                "channel": "email",
                "deliveries": 4,
                "wouldSend": 2,
                "skipped": {"suppressed": 1, "preference_off": 1},
                "deferredByQuietHours": 1,
                "estimatedSeconds": 95.2,
            }
        ],
        "bucketSeconds": 60,
        "histogram": buckets,
    }
    api.answer = lambda r: httpx.Response(200, json=forecast)
    result = invoke("dry-run", "--type", "t", "--topic", "fans")
    assert result.exit_code == 0, result.output
    assert api.seen[0].url.params["dryRun"] == "true"
    assert "4 users in the audience" in result.output
    assert "preference_off 1" in result.output and "suppressed 1" in result.output
    assert "1m36s" in result.output
    # 50 one-minute buckets are drawn as 17 rows of three minutes.
    assert "sends per 3m00s (UTC)" in result.output
    rows = [line for line in result.output.splitlines() if line.startswith(" 2030-01-01 ")]
    assert len(rows) == 17 and rows[0].startswith(" 2030-01-01 10:00 ")
    assert json.loads(invoke("dry-run", "--type", "t", "--topic", "f", "--json").output) == (
        forecast
    )


def test_api_errors_print_the_message_and_field_and_exit_1(api: StandIn) -> None:
    error = {
        "code": "unknown_topic",
        "message": "nobody follows topic 'x'",
        "field": "audience.topic",
    }
    api.answer = lambda r: httpx.Response(422, json={"error": error})
    for args in (
        ["create", "--type", "t", "--topic", "x"],
        ["dry-run", "--type", "t", "--topic", "x"],
    ):
        result = invoke(*args)
        assert result.exit_code == 1
        assert "nobody follows topic 'x' (field: audience.topic)" in result.output
        assert isinstance(result.exception, SystemExit)  # typer.Exit(1), no traceback
    api.answer = lambda r: httpx.Response(502, text="<html>bad gateway</html>")
    result = invoke("list")
    assert result.exit_code == 1 and "502: <html>bad gateway</html>" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--type", "t"], "give exactly one audience"),
        (["--type", "t", "--topic", "a", "--user", "u"], "give exactly one audience"),
        (["--type", "t", "--segment", "{oops"], "--segment is not valid JSON"),
        (["--type", "t", "--topic", "a", "--data", "[1,"], "--data is not valid JSON"),
    ],
)
def test_bad_options_are_refused_before_any_request(
    api: StandIn, args: list[str], message: str
) -> None:
    api.answer = lambda r: httpx.Response(500)
    for command in ("create", "dry-run"):
        result = invoke(command, *args)
        assert result.exit_code == 1 and message in result.output, result.output
    assert api.seen == []


def test_an_unreachable_api_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (
        ["create", "--type", "t", "--topic", "a"],
        ["dry-run", "--type", "t", "--topic", "a"],
        ["status", CAMPAIGN_ID],
        ["cancel", CAMPAIGN_ID],
        ["list"],
    ):
        result = invoke(*args, "--url", url)
        assert result.exit_code == 1, result.output
        assert f"cannot reach {url}/v1/campaigns" in result.output


# The whole command line against a real `tidings serve`.


def run(
    *args: str, cwd: Path, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidings", "campaign", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def _register(base: str) -> None:
    """A marketing type with an email template, three users following a topic."""
    async with httpx.AsyncClient(base_url=base) as client:
        kind = {"category": "marketing", "priority": "normal", "channels": ["email"]}
        assert (await client.put("/v1/types/spring.sale", json=kind)).status_code == 201
        template = {"subject": "Sale", "text": "{{ pct }}% off, {{ user.name }}"}
        url = "/v1/templates/spring.sale/email/en"
        assert (await client.put(url, json=template)).status_code == 201
        for name in ("ana", "bo", "cy"):
            profile = {"email": f"{name}@example.com", "attributes": {"name": name}}
            assert (await client.put(f"/v1/users/{name}", json=profile)).status_code == 201
        fans = {"userIds": ["ana", "bo", "cy"]}
        followed = await client.put("/v1/topics/artist:77/subscribers", json=fans)
        assert followed.status_code == 200, followed.text


@pytest.mark.slow
async def test_campaign_commands_against_a_running_service(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = tidings_env(campaigns__due_spread_seconds=0, campaigns__poll_interval=0.2) | {
        "COLUMNS": "80",
        "TIDINGS_URL": base,
    }
    with tidings_processes(env, tmp_path) as processes:
        server = processes.start("serve", ["serve", "--port", str(port)])
        await wait_ready(base, server)
        await _register(base)
        options = ["--type", "spring.sale", "--topic", "artist:77", "--data", '{"pct": 20}']

        forecast = run("dry-run", *options, "--json", cwd=tmp_path, env=env)
        assert forecast.returncode == 0, forecast.stdout + forecast.stderr
        shown = json.loads(forecast.stdout)
        assert shown["dryRun"] is True and shown["audienceSize"] == 3
        [email] = shown["channels"]
        assert (email["channel"], email["deliveries"], email["wouldSend"]) == ("email", 3, 3)
        assert sum(b["count"] for b in shown["histogram"]) == 3
        table = run("dry-run", *options, "--spread-over", "10m", cwd=tmp_path, env=env)
        assert table.returncode == 0, table.stdout + table.stderr
        assert "3 users in the audience" in table.stdout and "sends per" in table.stdout
        assert max(len(line) for line in table.stdout.splitlines()) <= 80

        created = run("create", *options, "--name", "spring", "--key", "s-1", cwd=tmp_path, env=env)
        assert created.returncode == 0, created.stdout + created.stderr
        _, campaign_id, status = created.stdout.split()
        assert status == "SCHEDULED"
        again = run("create", *options, "--name", "spring", "--key", "s-1", cwd=tmp_path, env=env)
        assert again.stdout.split()[1] == campaign_id  # the same key, the same campaign

        def shown_done() -> dict[str, Any] | None:
            status = run("status", campaign_id, "--json", cwd=tmp_path, env=env)
            assert status.returncode == 0, status.stdout + status.stderr
            body: dict[str, Any] = json.loads(status.stdout)
            return body if body["status"] == "DONE" else None

        done = await eventually(shown_done, within=30, interval=0.2)
        assert done["byStatus"] == {"SENT": 3} and done["audienceSize"] == 3
        table = run("status", campaign_id, cwd=tmp_path, env=env)
        assert table.returncode == 0, table.stdout + table.stderr
        assert f"campaign {campaign_id}" in table.stdout and "SENT 3" in table.stdout
        assert max(len(line) for line in table.stdout.splitlines()) <= 80

        # --watch follows a new campaign and stops by itself when it is done.
        second = run("create", *options, "--json", cwd=tmp_path, env=env)
        assert "Idempotency-Key: " in second.stderr
        second_id = json.loads(second.stdout)["campaignId"]
        watched = run("status", second_id, "--watch", cwd=tmp_path, env=env, timeout=45)
        assert watched.returncode == 0, watched.stdout + watched.stderr
        assert "DONE" in watched.stdout and "SENT 3" in watched.stdout
        watched = run("status", second_id, "--watch", "--json", cwd=tmp_path, env=env, timeout=45)
        assert json.loads(watched.stdout)["status"] == "DONE"  # the bar went to stderr

        listed = run("list", "--json", cwd=tmp_path, env=env)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        campaigns = json.loads(listed.stdout)["campaigns"]
        assert [c["campaignId"] for c in campaigns] == [second_id, campaign_id]
        table = run("list", "--limit", "1", cwd=tmp_path, env=env)
        assert second_id in table.stdout.split() and "next: --after " in table.stdout
        # Every line fits, but the cursor's: it is never cut, to be copied whole.
        lines = [line for line in table.stdout.splitlines() if not line.startswith("next:")]
        assert max(len(line) for line in lines) <= 80

        cancelled = run("cancel", campaign_id, "--json", cwd=tmp_path, env=env)
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        counts = json.loads(cancelled.stdout)
        assert counts["status"] == "DONE" and counts["sent"] == 3 and counts["cancelled"] == 0
        table = run("cancel", campaign_id, cwd=tmp_path, env=env)
        assert f"campaign {campaign_id} DONE" in table.stdout

        refused = run("create", "--type", "nope", "--topic", "artist:77", cwd=tmp_path, env=env)
        assert refused.returncode == 1
        assert "notification type 'nope' is not registered" in refused.stdout
        assert "(field: type)" in refused.stdout
        assert "Traceback" not in refused.stdout + refused.stderr
        missing = run("status", "01a230d8-86f3-75e2-8dfa-aade46dbfad9", cwd=tmp_path, env=env)
        assert missing.returncode == 1 and "404 not_found" in missing.stdout
        assert server.stop() == 0


def test_watch_shows_the_deliveries_progress_and_labels_the_expansion(
    api: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All 300 users expanded, 100 of 400 deliveries sent: the bar says 25%, not 100%."""
    body = {
        "campaignId": CAMPAIGN_ID,
        "name": None,
        "type": "spring.sale",
        "status": "CANCELLED",  # final: the watch draws once and stops
        "priority": "low",
        "channels": ["email", "push"],
        "audience": {"topic": "spring"},
        "sendAt": "2026-03-01T10:00:00+00:00",
        "spreadSeconds": 3600,
        "localTime": None,
        "audienceSize": 300,
        "expanded": 300,
        "deliveries": 400,
        "byStatus": {"SENT": 100, "PENDING": 300},
        "skippedByReason": {},
        "percentDone": 25.0,
        "estimatedFinish": None,
        "createdAt": "2026-03-01T09:00:00+00:00",
        "startedAt": "2026-03-01T10:00:00+00:00",
        "finishedAt": "2026-03-01T10:30:00+00:00",
    }
    api.answer = lambda r: httpx.Response(200, json=body)
    # Wide enough for the whole line, whatever terminal the tests run in.
    monkeypatch.setattr(campaign_cli, "console", Console(width=200))
    result = invoke("status", CAMPAIGN_ID, "--watch")
    assert result.exit_code == 0, result.output
    bar = next(line for line in result.output.splitlines() if line.startswith("CANCELLED"))
    assert "25%" in bar and "100%" not in bar, bar
    assert "deliveries 100/400" in bar, bar
    assert "users expanded 300/300" in result.output.splitlines(), result.output
