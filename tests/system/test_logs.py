"""Logs (docs/operations.md, Logs): JSON lines off a terminal, a request id per HTTP request
carried into the deliveries it creates, and never an address, a body or a credential.

The full run is a real ``tidings serve`` sending through ``tidings simulate`` with the
simulator's accounts and credentials, at DEBUG and then at INFO; every line it logged is
then read: valid JSON, the fields, the request ids, and none of the values it was given.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import pty
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import eventually, put_type
from tests.processes import (
    TidingsProcess,
    TidingsProcesses,
    free_port,
    tidings_env,
    tidings_processes,
    wait_ready,
)
from tests.system.test_simulate_cli import wait_simulator
from tidings import logs
from tidings.api.app import create_app
from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.service import Service
from tidings.store.claims import claim_due
from tidings.store.engine import Database
from tidings.store.schema import notification

# The middleware.


async def test_a_valid_request_id_is_echoed(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz", headers={"X-Request-Id": "checkout.7-A_b"})
    assert response.headers["x-request-id"] == "checkout.7-A_b"


@pytest.mark.parametrize("given", ["has space", "a" * 65, "semi;colon", "", "é"])
async def test_an_invalid_request_id_is_replaced(client: httpx.AsyncClient, given: str) -> None:
    response = await client.get("/healthz", headers={"X-Request-Id": given.encode()})
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])


async def test_every_request_gets_an_id_even_a_refused_one(client: httpx.AsyncClient) -> None:
    first = await client.get("/healthz")
    too_big = await client.post(
        "/v1/notifications", content=b"x" * (2 * 1024 * 1024), headers={"X-Request-Id": "big"}
    )
    assert too_big.status_code == 413
    assert too_big.headers["x-request-id"] == "big"
    assert first.headers["x-request-id"] != (await client.get("/healthz")).headers["x-request-id"]


async def test_an_unexpected_error_answers_and_logs_with_the_id(service: Service) -> None:
    """Outside even Starlette's error middleware: the 500 and its log line carry the id."""
    app = create_app(service)

    async def boom() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/boom", boom)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonFormatter())
    errors_log = logging.getLogger("tidings.api.errors")
    errors_log.addHandler(handler)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://tidings") as client:
            response = await client.get("/boom", headers={"X-Request-Id": "oops-1"})
    finally:
        errors_log.removeHandler(handler)
    assert response.status_code == 500 and response.headers["x-request-id"] == "oops-1"
    (line,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert line["request_id"] == "oops-1" and "RuntimeError: a bug" in line["exc"]


async def test_the_request_id_is_stored_and_claimed(
    client: httpx.AsyncClient, db: Database
) -> None:
    """On both databases (PostgreSQL's insert is a path of its own): single and batch."""
    await put_type(client, "id.check", priority="high", channels=("email",))
    one = await client.post(
        "/v1/notifications",
        json={"type": "id.check", "to": {"email": "ana@example.com"}},
        headers={"Idempotency-Key": "one", "X-Request-Id": "req-single"},
    )
    batch = await client.post(
        "/v1/notifications/batch",
        json={
            "notifications": [
                {"idempotencyKey": "two", "type": "id.check", "to": {"email": "bo@example.com"}}
            ]
        },
        headers={"X-Request-Id": "req-batch"},
    )
    assert one.status_code == 202 and batch.status_code == 200, (one.text, batch.text)
    query = sa.select(notification.c.idempotency_key, notification.c.request_id)
    async with db.engine.connect() as conn:
        stored = {row.idempotency_key: row.request_id for row in await conn.execute(query)}
    assert stored == {"one": "req-single", "two": "req-batch"}
    now = utcnow()
    claimed = await claim_due(db, Priority.HIGH, 10, now, now + timedelta(seconds=30))
    assert sorted(d.request_id or "" for d in claimed) == ["req-batch", "req-single"]


# The formatter.


def _record(msg: str, *args: object, exc: bool = False, **extra: object) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("boom with tdk_abcdefghijklmnop")
        except ValueError:
            info = sys.exc_info()
    record = logging.LogRecord("tidings.test", logging.WARNING, __file__, 1, msg, args, info)
    record.__dict__.update(extra)
    return record


def test_a_json_line_has_the_fields_the_context_and_the_exception() -> None:
    with logs.bound(request_id="r-1", account="ignored-below"):
        line = logs.JsonFormatter().format(
            _record("sent %s", "it", exc=True, delivery_id="d-1", account="sendgrid-sim")
        )
    entry = json.loads(line)
    assert entry["level"] == "WARNING" and entry["logger"] == "tidings.test"
    assert entry["msg"] == "sent it"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", entry["ts"])
    assert (entry["request_id"], entry["delivery_id"], entry["account"]) == (
        "r-1",
        "d-1",
        "sendgrid-sim",
    )
    assert "ValueError: boom" in entry["exc"] and "abcdefghijklmnop" not in entry["exc"]
    assert "request_id" not in json.loads(logs.JsonFormatter().format(_record("later")))


def test_the_formatter_redacts_what_slipped_through() -> None:
    leaky = (
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz key tdk_0123456789abcdefABCDEF "
        "secret whsec_c2VjcmV0IHNlY3JldA== jwt eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln "
        "to ana.maria@example.com or +14155550123 at https://sns.example/confirm?Token=s3cr3t "
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----"
    )
    text = logs.JsonFormatter().format(_record("%s", leaky))
    for secret in (
        "abcdefghijklmnopqrstuvwxyz",
        "0123456789abcdef",
        "c2VjcmV0",
        "eyJ",
        "ana.maria@",
        "4155550123",
        "s3cr3t",
        "MIIEvQIBADANBg",
    ):
        assert secret not in text, secret
    assert "a***@example.com" in text and "https://sns.example/confirm?" in text


def test_the_text_format_shows_the_fields_after_the_message() -> None:
    with logs.bound(request_id="r-2"):
        line = logs.TextFormatter().format(_record("reaped %d", 3, delivery_id="d-2"))
    assert line.endswith("WARNING tidings.test: reaped 3 [request_id=r-2 delivery_id=d-2]")


def test_access_paths_lose_their_query_and_tokens() -> None:
    assert logs.safe_path("/v1/notifications/abc?token=x") == "/v1/notifications/abc"
    assert logs.safe_path("/u/signed.token") == "/u/…"
    assert logs.safe_path("/p/signed.token") == "/p/…"
    assert logs.safe_path("/t/o/signed.token?x=1") == "/t/…"
    assert logs.safe_path("/v1/suppressions/email/ana@example.com") == "/v1/suppressions/email/…"
    assert logs.safe_path("/v1/devices/fcm-token-1") == "/v1/devices/…"


_CONFIGURED = """
import logging, warnings
from tidings import logs
logs.configure()
logging.getLogger("tidings.x").debug("own debug")
logging.getLogger("tidings.x").info("own info")
logging.getLogger("httpx").info("library info")
logging.getLogger("httpx").warning("library warning")
warnings.warn("a warning")
"""


def _configured(env: dict[str, str], terminal: bool = False) -> list[str]:
    """The lines a process that configured logging writes to stderr (a terminal or a pipe)."""
    full = {**os.environ, **env, "PYTHONWARNINGS": "default"}
    if not terminal:
        done = subprocess.run(
            [sys.executable, "-c", _CONFIGURED],
            env=full,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stderr.splitlines()
    primary, secondary = pty.openpty()
    try:
        subprocess.run([sys.executable, "-c", _CONFIGURED], env=full, stderr=secondary, check=True)
        os.close(secondary)
        return [line for line in _read_all(primary).decode().splitlines() if line.strip()]
    finally:
        os.close(primary)


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal's other end is closed
            return out
        if not chunk:
            return out
        out += chunk


def test_off_a_terminal_every_line_is_json_and_libraries_keep_quiet() -> None:
    lines = _configured({"TIDINGS_LOG_LEVEL": "debug"})
    entries = [json.loads(line) for line in lines]
    assert [(e["logger"], e["msg"]) for e in entries][:3] == [
        ("tidings.x", "own debug"),
        ("tidings.x", "own info"),
        ("httpx", "library warning"),
    ]
    assert entries[3]["logger"] == "py.warnings" and "a warning" in entries[3]["msg"]
    assert len(entries) == 4


def test_on_a_terminal_the_human_format_and_the_level() -> None:
    lines = _configured({}, terminal=True)
    assert len(lines) == 3, lines  # INFO: no debug line
    assert lines[0].endswith("INFO tidings.x: own info")
    forced = _configured({"TIDINGS_LOG_FORMAT": "json", "TIDINGS_LOG_LEVEL": "WARNING"}, True)
    assert json.loads(forced[0])["msg"] == "library warning"


def test_a_wrong_setting_is_said_and_the_default_used() -> None:
    lines = _configured({"TIDINGS_LOG_LEVEL": "loud", "TIDINGS_LOG_FORMAT": "xml"})
    said = [json.loads(line)["msg"] for line in lines]
    assert any("TIDINGS_LOG_LEVEL='loud'" in s for s in said)
    assert any("TIDINGS_LOG_FORMAT='xml'" in s for s in said)
    assert "own info" in said and "own debug" not in said


# The full run.

CODE, CITY = "91827364", "Zanzibar"
EMAILS = [f"quokka.{name}@example.org" for name in ("ana", "bo", "cy", "di")]
PHONES = ["+14155550199", "+14155550142"]  # the second one Twilio refuses (21211)
TOKENS = ["fcm-quokka-token-" + "a" * 40, "fcm-quokka-token-" + "b" * 40]  # FCM refuses #2
INVALID_EMAIL = "broken-quokka-address"
HOOK = "webhook-receiver/quokka-hook"
TEMPLATES = {
    "email": {"subject": "Quokka code {{ code }}", "text": "Quokka says {{ code }} in {{ city }}."},
    "sms": {"text": "Quokka {{ code }} {{ city }}"},
    "push": {"subject": "Quokka", "text": "Quokka {{ code }}"},
}


class Run:
    """One tidings serve against the simulator, with an API key."""

    def __init__(self, base: str, sim: str, key: str) -> None:
        self.base, self.sim = base, sim
        self.api = httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"})
        self.answers: dict[str, dict[str, Any]] = {}  # request id -> the 202's body

    async def __aenter__(self) -> Run:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.api.aclose()

    async def send(self, request_id: str, body: dict[str, Any], expect: int = 202) -> None:
        headers = {"Idempotency-Key": str(uuid.uuid4()), "X-Request-Id": request_id}
        answer = await self.api.post("/v1/notifications", json=body, headers=headers)
        assert answer.status_code == expect, answer.text
        assert answer.headers["x-request-id"] == request_id
        if expect == 202:
            self.answers[request_id] = answer.json()

    async def script(self, provider: str, address: str, error: str) -> None:
        async with httpx.AsyncClient(base_url=self.sim) as sim:
            answer = await sim.post(
                f"/_sim/{provider}/script", json={"address": address, "error": error}
            )
            assert answer.status_code == 204, answer.text

    async def settled(self) -> None:
        async def done() -> bool:
            for body in self.answers.values():
                shown = (await self.api.get(f"/v1/notifications/{body['id']}")).json()
                if any(d["status"] in ("PENDING", "SENDING") for d in shown["deliveries"]):
                    return False
            return True

        await eventually(done, within=20, interval=0.1)


async def _serve(
    processes: TidingsProcesses, config: Path, base: str, level: str
) -> TidingsProcess:
    processes.env = {**processes.env, "TIDINGS_LOG_LEVEL": level}
    port = base.rsplit(":", 1)[1]
    serve = processes.start(f"serve-{level}", ["serve", "--config", str(config), "--port", port])
    await wait_ready(base, serve)
    return serve


async def _simulate(processes: TidingsProcesses, ports: tuple[int, int], config: Path) -> str:
    """``tidings simulate``, reporting to tidings' public URL; its URL."""
    http, smtp = (str(port) for port in ports)
    options = {"--http-port": http, "--smtp-port": smtp, "--write-config": str(config)}
    options |= {"--credentials-dir": str(config.parent / "creds")}
    options |= {"--tidings-url": processes.env["TIDINGS_PUBLIC_URL"]}
    args = [part for option in options.items() for part in option]
    simulator = processes.start("simulate", ["simulate", *args])
    url = f"http://127.0.0.1:{http}"
    await wait_simulator(url, config, simulator)
    return url


async def _register(api: httpx.AsyncClient) -> None:
    kind = {
        "category": "transactional",
        "priority": "high",
        "channels": ["email", "sms", "push", "webhook"],
        "retry": {"baseDelay": 0.2, "maxDelay": 0.4},
    }
    assert (await api.put("/v1/types/quokka.code", json=kind)).status_code == 201
    for channel, parts in TEMPLATES.items():
        answer = await api.put(f"/v1/templates/quokka.code/{channel}/en", json=parts)
        assert answer.status_code == 201, answer.text
    await put_type(api, "quokka.news", category="marketing", channels=("email",), templates=False)
    news = {"subject": "Quokka news", "text": "Quokka news. Leave: {{ unsubscribe_url }}"}
    assert (await api.put("/v1/templates/quokka.news/email/en", json=news)).status_code == 201


async def _debug_run(run: Run) -> str:
    """Sends that succeed, fail and retry; an unsubscribe; refused calls. The link's token."""
    await _register(run.api)
    await run.script("twilio", PHONES[1], "21211")
    await run.script("fcm", TOKENS[1], "INVALID_ARGUMENT")
    await run.script("sendgrid", EMAILS[1], "500")  # once: retried, then sent
    data = {"code": CODE, "city": CITY}
    to = {
        "email": EMAILS[0],
        "phone": PHONES[0],
        "deviceTokens": [TOKENS[0]],
        "webhookUrl": f"{run.sim}/{HOOK}",
    }
    await run.send("logs-r1.all_sent", {"type": "quokka.code", "to": to, "data": data})
    to = {"email": EMAILS[1], "phone": PHONES[1], "deviceTokens": [TOKENS[1]]}
    await run.send("logs-r2.failures", {"type": "quokka.code", "to": to, "data": data})
    await run.send(
        "logs-r3.news", {"type": "quokka.news", "to": {"email": EMAILS[2]}, "data": data}
    )
    await run.send(
        "logs-r4.invalid",
        {"type": "quokka.code", "to": {"email": INVALID_EMAIL}, "data": data},
        422,
    )
    await run.settled()
    async with httpx.AsyncClient(base_url=run.sim) as sim:
        mails = (await sim.get("/_sim/sendgrid/messages")).json()
    text = next(m for m in mails if m["address"] == EMAILS[2])["payload"]["content"][0]["value"]
    token = re.search(r"/u/([^\s\"'<>]+)", text)
    assert token is not None, text
    async with httpx.AsyncClient(base_url=run.base) as public:
        assert (await public.get(f"/u/{token.group(1)}?utm=quokka")).status_code == 200
        assert (await public.post(f"/u/{token.group(1)}")).status_code == 200
        wrong = {"Authorization": "Bearer tdk_quokkaWrongKey0123456789abcdefghijklmnopq"}
        unknown = f"/v1/notifications/{uuid.uuid4()}"
        assert (await public.get(unknown, headers=wrong)).status_code == 401
    return token.group(1)


def _entries(process: TidingsProcess) -> list[dict[str, Any]]:
    """Every line the process wrote, each a JSON object with the fields every line has."""
    entries = []
    for line in process.log().splitlines():
        entry = json.loads(line)
        assert isinstance(entry, dict), line
        assert {"ts", "level", "logger", "msg"} <= entry.keys(), line
        assert all(isinstance(entry[k], str) for k in ("ts", "level", "logger", "msg")), line
        entries.append(entry)
    return entries


def _secrets(config: Path, key: str, token: str) -> Iterator[str]:
    """Every credential the run used: the configuration's, its key files', the API key's."""
    accounts = tomllib.loads(config.read_text())["accounts"]
    for account in accounts.values():
        for name, value in account.items():
            if re.search(r"(api_key|password|token|secret|signing_key)$", name):
                yield value
            if name.endswith("_file") and Path(value).suffix in (".pem", ".key", ".p8", ".json"):
                yield from _key_material(Path(value).read_text())
    twilio = accounts["twilio-sim"]
    yield base64.b64encode(f"{twilio['account_sid']}:{twilio['auth_token']}".encode()).decode()
    yield from (key, key[4:], token, "quokkaWrongKey", "test-secret-quokka")


def _key_material(text: str) -> Iterator[str]:
    """Long runs of a key file's base64 (PEM bodies, a service account's private key)."""
    if text.lstrip().startswith("{"):
        text = json.loads(text)["private_key"]
    for line in text.replace("\\n", "\n").splitlines():
        if len(line) >= 40 and not line.startswith("-----"):
            yield line[:40]


def _check_nothing_leaked(text: str, secrets: list[str]) -> None:
    needles = [*EMAILS, *(e.split("@")[0] for e in EMAILS), *PHONES, *(p[1:] for p in PHONES)]
    needles += [*TOKENS, INVALID_EMAIL, HOOK, CODE, CITY, "Quokka", "quokka-", *secrets]
    found = [n for n in needles if n and n in text]
    assert not found, f"in the logs: {found}"
    for shape in ("eyJ", "Bearer ", "Basic ", "-----BEGIN", "?utm", "tdk_q"):
        assert shape not in text, shape


def _check_request_ids(
    entries: list[dict[str, Any]], run: Run, statuses: dict[str, set[str]]
) -> None:
    """The API's lines and the dispatcher's lines about each request's deliveries carry its id."""
    access = [e for e in entries if e["logger"] == "uvicorn.access"]
    assert access and all(
        re.fullmatch(r"[A-Za-z0-9._-]{1,64}", e.get("request_id", "")) for e in access
    )
    sending = [e for e in entries if e["logger"] == "tidings.dispatch.pipeline.sending"]
    for request_id, body in run.answers.items():
        assert any(
            e.get("request_id") == request_id and "POST /v1/notifications" in e["msg"]
            for e in access
        )
        for delivery in body["deliveries"]:
            lines = [e for e in sending if e.get("delivery_id") == delivery["id"]]
            wanted = statuses.get(f"{request_id}:{delivery['channel']}", set())
            assert {e["status"] for e in lines} >= wanted, (request_id, delivery, lines)
            for line in lines:
                assert line["request_id"] == request_id and line["notification_id"] == body["id"]


async def _info_run(run: Run) -> None:
    """At INFO: a delivery that fails, whose line must carry its request id."""
    await run.script("sendgrid", EMAILS[3], "400")
    data = {"code": CODE, "city": CITY}
    await run.send(
        "logs-r5.info", {"type": "quokka.code", "to": {"email": EMAILS[3]}, "data": data}
    )
    await run.settled()


DEBUG_STATUSES = {
    "logs-r1.all_sent:email": {"SENT"},
    "logs-r1.all_sent:sms": {"SENT"},
    "logs-r1.all_sent:push": {"SENT"},
    "logs-r1.all_sent:webhook": {"SENT"},
    "logs-r2.failures:email": {"PENDING", "SENT"},  # retry_scheduled, then sent
    "logs-r2.failures:sms": {"FAILED"},
    "logs-r2.failures:push": {"FAILED"},
    "logs-r3.news:email": {"SENT"},
}


@pytest.mark.slow
async def test_a_full_run_logs_no_address_body_or_credential(tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "tidings.toml"
    lanes = {p: {"concurrency": 8, "poll_interval": 0.1} for p in ("high", "normal", "low")}
    settings = {"public_url": base, "secret_key": "test-secret-quokka", "access_log": "true"}
    env = tidings_env(**settings, outcome_flush_interval=0.01, lanes=lanes)
    with tidings_processes(env, tmp_path) as processes:
        sim_url = await _simulate(processes, (free_port(), free_port()), config)
        debug = await _serve(processes, config, base, "DEBUG")
        key = _create_key(env, tmp_path, config)
        async with Run(base, sim_url, key) as run:
            token = await _debug_run(run)
        assert await debug.stop_and_wait() == 0, debug.log_tail()
        info = await _serve(processes, config, base, "INFO")
        async with Run(base, sim_url, key) as later:
            await _info_run(later)
        assert await info.stop_and_wait() == 0, info.log_tail()

    secrets = list(_secrets(config, key, token))
    for process in (debug, info):
        _check_nothing_leaked(process.log(), secrets)
    debug_entries, info_entries = _entries(debug), _entries(info)
    _check_request_ids(debug_entries, run, DEBUG_STATUSES)
    _check_request_ids(info_entries, later, {"logs-r5.info:email": {"FAILED"}})
    own = {"tidings", "uvicorn", "alembic"}
    for entry in debug_entries:  # below WARNING, only tidings' own loggers speak
        assert entry["level"] not in ("DEBUG", "INFO") or entry["logger"].split(".")[0] in own
    assert not [e for e in info_entries if e["level"] == "DEBUG"]


def _create_key(env: dict[str, str], workdir: Path, config: Path) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tidings",
            "keys",
            "create",
            "--name",
            "logs",
            "--scopes",
            "all",
            "--json",
            "--config",
            str(config),
        ],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    key: str = json.loads(done.stdout)["key"]
    return key
