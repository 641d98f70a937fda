"""The ``tidings`` command line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperCommand

from tidings import logs
from tidings.simulator.cli import simulate

if TYPE_CHECKING:
    import httpx

    from tidings.settings import Settings

# Every `tidings` call imports this module, `--help` too: what a command needs (the
# settings, the store, the API, httpx) is imported inside it, so a call pays only for its own.


class _Argument(TyperArgument):
    """An argument shown as click shows it: ``NAME`` or ``NAME...`` (typer would print
    ``{name}`` in the usage line and ``<str>`` after it in the help)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = (self.metavar or self.name or "") + ("..." if self.nargs != 1 else "")
        return [name if self.required else f"[{name}]"]


class Command(TyperCommand):
    """Every tidings command: readable argument names in its help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.__class__ = _Argument
                param.metavar = param.metavar or (param.name or "").upper()


def new_typer(help: str, **kwargs: Any) -> typer.Typer:
    # Plain help (no rich markup): rich would swallow "[default: 8000]" in help texts and
    # print every option's type as <int>, <bool>.
    return typer.Typer(help=help, rich_markup_mode=None, no_args_is_help=True, **kwargs)


app = new_typer("tidings: durable multi-channel notifications.")
console = Console()

# Options whose default is None take the configuration file's value (or its default).
ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", metavar="FILE", help="TOML configuration file.", exists=True),
]
HostOption = Annotated[
    str | None,
    typer.Option(metavar="HOST", help="Interface to listen on [default: 127.0.0.1]."),
]
PortOption = Annotated[
    int | None, typer.Option(metavar="PORT", help="Port to listen on [default: 8000].")
]
UrlOption = Annotated[
    str,
    typer.Option(
        metavar="URL",
        envvar="TIDINGS_URL",
        help="Base URL of a running tidings API (its API key: TIDINGS_API_KEY).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the raw JSON instead.")]
NoAuthOption = Annotated[
    bool,
    typer.Option(
        "--no-auth",
        help="Serve an address other than loopback while no API key exists "
        "(behind a gateway that authenticates).",
    ),
]


def _settings(config: Path | None, **overrides: Any) -> Settings:
    """The settings, or a readable error naming each field that is wrong."""
    from pydantic import ValidationError

    from tidings.settings import Settings

    try:
        return Settings.load(config, **{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as error:
        problems = []
        for problem in error.errors():
            where = ".".join(str(part) for part in problem["loc"])
            text = problem["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {text}" if where else text)
        fail("invalid configuration: " + "; ".join(problems))
    except FileNotFoundError as error:
        fail(str(error))
    raise AssertionError("unreachable")


def _logging() -> None:
    """JSON lines off a terminal, the human format on one (docs/operations.md, Logs)."""
    logs.configure()


def _run(settings: Settings, api: bool, dispatch: bool, migrate: bool, **kafka: Any) -> None:
    """``kafka``: ``relay=True`` and/or ``worker=WorkerPlan(...)``, or ``sock`` (runner.run)."""
    from tidings.runner import StartRefused, run

    _logging()
    job = run(settings, api=api, dispatch=dispatch, migrate=migrate, **kafka)
    # uvloop (installed with uvicorn[standard] where it builds) roughly halves the cost of
    # the event loop itself, which the API and the dispatcher spend much of their time in.
    try:
        import uvloop
    except ImportError:
        runner: Any = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(job)
    except StartRefused as refused:
        fail(str(refused))


def _kafka_settings(config: Path | None, command: str) -> Settings:
    settings = _settings(config)
    if settings.transport != "kafka":
        fail(
            f"tidings {command} is part of the Kafka transport: set TIDINGS_TRANSPORT=kafka "
            "and TIDINGS_KAFKA_BOOTSTRAP (and a PostgreSQL TIDINGS_DATABASE_URL)"
        )
    return settings


def _plan(settings: Settings, lanes: str | None = None, channels: str | None = None) -> Any:
    from tidings.dispatch.kafka_lane import WorkerPlan
    from tidings.priorities import Channel, Priority

    assert settings.kafka_bootstrap is not None  # checked by the settings
    return WorkerPlan(
        settings.kafka_bootstrap,
        settings.kafka,
        _choose("--lanes", lanes, Priority) or tuple(Priority),
        _choose("--channels", channels, Channel) or tuple(Channel),
    )


def _choose(option: str, given: str | None, kind: Any) -> tuple[Any, ...]:
    """``high,low`` -> (Priority.HIGH, Priority.LOW); an unknown name fails naming it."""
    if given is None:
        return ()
    names = [name.strip().lower() for name in given.split(",") if name.strip()]
    known = [member.value for member in kind]
    for name in names:
        if name not in known:
            fail(f"{option}: unknown name {name!r} (expected some of {', '.join(known)})")
    if not names:
        fail(f"{option}: name at least one of {', '.join(known)}")
    return tuple(dict.fromkeys(kind(name) for name in names))


@app.command(cls=Command)
def serve(
    config: ConfigOption = None,
    host: HostOption = None,
    port: PortOption = None,
    no_auth: NoAuthOption = False,
) -> None:
    """Run everything in one process: migrate, the API and the dispatcher (embedded mode;
    with the Kafka transport, the API, a relay and a worker)."""
    settings = _settings(config, host=host, port=port, allow_no_keys=no_auth or None)
    if settings.transport == "kafka":
        _run(settings, api=True, dispatch=False, migrate=True, relay=True, worker=_plan(settings))
    else:
        _run(settings, api=True, dispatch=True, migrate=True)


WorkersOption = Annotated[
    int,
    typer.Option(
        "--workers",
        "-w",
        min=1,
        metavar="N",
        help="API processes sharing the port (one event loop each); about one per CPU the "
        "API may use, when one process's CPU is what limits POST /v1/notifications. Each "
        "keeps its own per-key rate limits.",
    ),
]


@app.command(cls=Command)
def api(
    config: ConfigOption = None,
    host: HostOption = None,
    port: PortOption = None,
    no_auth: NoAuthOption = False,
    workers: WorkersOption = 1,
) -> None:
    """Run only the HTTP API (server mode; run `tidings migrate` first). With --workers N,
    N processes accept on one port, as behind a load balancer but on one machine."""
    settings = _settings(config, host=host, port=port, allow_no_keys=no_auth or None)
    if workers == 1:
        _run(settings, api=True, dispatch=False, migrate=False)
        return
    from tidings.runner import run_workers

    _logging()
    code = run_workers(workers, settings, _serve_api_worker)
    if code:
        raise typer.Exit(code)


def _serve_api_worker(settings: Settings, sock: Any) -> None:
    """One of ``api --workers``'s processes, on the socket its parent bound."""
    try:
        _run(settings, api=True, dispatch=False, migrate=False, sock=sock)
    except typer.Exit as exited:  # fail(): the message is printed, the code is the child's
        raise SystemExit(exited.exit_code) from None


@app.command(cls=Command)
def dispatch(config: ConfigOption = None) -> None:
    """Run only a dispatcher; any number may share one PostgreSQL database."""
    settings = _settings(config)
    if settings.transport == "kafka":
        fail("with TIDINGS_TRANSPORT=kafka, run `tidings relay` and `tidings worker` instead")
    _run(settings, api=False, dispatch=True, migrate=False)


LanesOption = Annotated[
    str | None,
    typer.Option(
        metavar="LANES", help="Priorities to consume, comma-separated [default: high,normal,low]."
    ),
]
ChannelsOption = Annotated[
    str | None,
    typer.Option(
        metavar="CHANNELS",
        help="Channels to consume, comma-separated [default: email,sms,push,webhook].",
    ),
]


@app.command(cls=Command)
def relay(config: ConfigOption = None) -> None:
    """Kafka transport: publish due deliveries to the priority topics (any number of relays
    may run); also expands campaigns and returns expired leases."""
    _run(_kafka_settings(config, "relay"), api=False, dispatch=False, migrate=False, relay=True)


@app.command(cls=Command)
def worker(
    config: ConfigOption = None, lanes: LanesOption = None, channels: ChannelsOption = None
) -> None:
    """Kafka transport: consume the priority topics and send (one consumer group per lane)."""
    settings = _kafka_settings(config, "worker")
    plan = _plan(settings, lanes, channels)
    _run(settings, api=False, dispatch=False, migrate=False, worker=plan)


@app.command(cls=Command)
def migrate(config: ConfigOption = None) -> None:
    """Create or upgrade the database schema to the latest migration. On PostgreSQL a new
    or small database is put on day partitions; a larger one stays on plain tables until
    `tidings partitions enable`."""
    from tidings.store.engine import connect
    from tidings.store.migrate import current_revision, upgrade
    from tidings.store.partitions import partition_status

    async def _migrate() -> str:
        settings = _settings(config)
        db = connect(settings.database_url)
        try:
            await upgrade(db, partitions_ahead=settings.partitions_ahead)
            done = f"schema at revision {await current_revision(db)}"
            if not db.is_postgres:
                return done
            found = await partition_status(db)
        finally:
            await db.dispose()
        if not found.partitioned:
            return f"{done}\nplain tables, not day partitions: see `tidings partitions enable`"
        days = found.days["notification"]
        return f"{done}\nday partitions {days[0]} to {days[-1]}" if days else done

    console.print(asyncio.run(_migrate()), highlight=False, soft_wrap=True)


@app.command(cls=Command)
def retention(config: ConfigOption = None) -> None:
    """Apply the retention now (dispatchers do it hourly): delete in batches the
    notifications older than retention_days whose deliveries are all final (or, on day
    partitions, drop such days and make the partitions ahead), prune idempotency keys older
    than idempotency_days."""
    from tidings.clock import utcnow
    from tidings.store.engine import connect
    from tidings.store.partitions import ensure_partitions, run_retention

    settings = _settings(config)

    async def _apply() -> str:
        db = connect(settings.database_url)
        try:
            now = utcnow()
            await ensure_partitions(db, now.date(), settings.partitions_ahead)
            done = await run_retention(db, now, settings.retention_days, settings.idempotency_days)
        finally:
            await db.dispose()
        dropped = ", ".join(map(str, done.dropped_days)) or "none"
        kept = ", ".join(map(str, done.kept_days)) or "none"
        return (
            f"days dropped: {dropped}\nold days kept (deliveries in progress): {kept}\n"
            f"notifications deleted: {done.notifications_deleted}\n"
            f"idempotency keys pruned: {done.keys_deleted}\n"
            f"events deleted: {done.log.events}\n"
            f"webhook messages deleted: {done.log.messages}"
        )

    console.print(asyncio.run(_apply()))


@app.command("webhook-secret", cls=Command)
def webhook_secret(
    url: Annotated[str, typer.Argument(help="The receiver's URL, as notifications name it.")],
    account: Annotated[
        str, typer.Option(metavar="NAME", help="The webhook account that signs for it.")
    ],
    config: ConfigOption = None,
) -> None:
    """Print the secret a webhook receiver verifies with: its own, derived from the
    account's secret and its URL."""
    from tidings.providers.base import ProviderError
    from tidings.providers.webhook.adapter import WebhookAccount, endpoint_secret

    found = _settings(config).accounts.get(account)
    if found is None:
        fail(f"no account named {account!r} in the configuration")
        return
    if not isinstance(found, WebhookAccount):
        fail(f"{account!r} is not a webhook account (its kind is {found.kind})")
        return
    try:
        secret = endpoint_secret(found.secret.get_secret_value(), url)
    except ProviderError as error:
        fail(str(error))
        return
    if url.lower().startswith("http:") and not found.allow_insecure:
        # Still printed: the operator may be about to set allow_insecure.
        typer.echo(f"note: {account!r} refuses http:// targets (allow_insecure = false)", err=True)
    print(secret)


T = TypeVar("T")


def in_database(config: Path | None, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work`` on the configured database, once it is migrated (the commands that work
    on the database itself, not through the API: keys, partitions)."""
    from tidings.store.engine import connect
    from tidings.store.migrate import is_current

    settings = _settings(config)

    async def run() -> T:
        db = connect(settings.database_url)
        try:
            if not await is_current(db):
                fail(
                    "the database is not migrated: run `tidings migrate` "
                    "(or start `tidings serve` once) first"
                )
            return await work(db)
        finally:
            await db.dispose()

    return asyncio.run(run())


def fail(message: str) -> None:
    # Not cut into lines: a message names its field whole, for grep and copy.
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def http_request(method: str, url: str, timeout: float = 30, **kwargs: Any) -> httpx.Response:
    """A request to the API, with the key in TIDINGS_API_KEY (if set)."""
    import httpx

    key = os.environ.get("TIDINGS_API_KEY")
    if key:
        kwargs["headers"] = {**kwargs.get("headers", {}), "Authorization": f"Bearer {key}"}
    try:
        return httpx.request(method, url, timeout=timeout, **kwargs)
    except httpx.HTTPError as error:
        fail(f"cannot reach {url}: {error}")
        raise  # unreachable; keeps type checkers content


def error_text(response: httpx.Response) -> str:
    if response.status_code == 401:
        # The API's own message names its header; the CLI user sets an environment variable.
        if os.environ.get("TIDINGS_API_KEY"):
            return "401: the key in TIDINGS_API_KEY is not valid (unknown, revoked or mistyped)"
        return "401: this needs an API key: set TIDINGS_API_KEY (`tidings keys create` makes one)"
    try:
        error = response.json()["error"]
        field = f" (field: {error['field']})" if error.get("field") else ""
        return f"{response.status_code} {error['code']}: {error['message']}{field}"
    except (ValueError, KeyError, TypeError):
        return f"{response.status_code}: {response.text[:500]}"


@app.command(cls=Command)
def send(
    type_: Annotated[str, typer.Option("--type", metavar="TYPE", help="Notification type name.")],
    user: Annotated[str | None, typer.Option(metavar="ID", help="User id.")] = None,
    data: Annotated[
        str, typer.Option(metavar="JSON", help="Template data as a JSON object.")
    ] = "{}",
    email: Annotated[
        str | None, typer.Option(metavar="ADDRESS", help="Send to this email address.")
    ] = None,
    phone: Annotated[
        str | None, typer.Option(metavar="NUMBER", help="Send to this phone (E.164).")
    ] = None,
    channel: Annotated[
        list[str] | None,
        typer.Option(metavar="CHANNEL", help="Only this channel (repeat for more)."),
    ] = None,
    priority: Annotated[
        str | None, typer.Option(metavar="PRIORITY", help="high, normal or low.")
    ] = None,
    key: Annotated[
        str | None, typer.Option(metavar="KEY", help="Idempotency key [default: random].")
    ] = None,
    url: UrlOption = "http://127.0.0.1:8000",
) -> None:
    """Send one notification through a running API and print its id."""
    try:
        payload: dict[str, Any] = {"type": type_, "data": json.loads(data)}
    except json.JSONDecodeError as error:
        fail(f"--data is not valid JSON: {error}")
        return
    to = {k: v for k, v in (("email", email), ("phone", phone)) if v}
    optional = {"userId": user, "to": to or None, "channels": channel, "priority": priority}
    payload.update({k: v for k, v in optional.items() if v})
    headers = {"Idempotency-Key": key or str(uuid.uuid4())}
    response = http_request("POST", f"{url}/v1/notifications", json=payload, headers=headers)
    if response.status_code != 202:
        fail(error_text(response))
    print(response.json()["id"])


@app.command(cls=Command)
def status(
    notification_id: Annotated[str, typer.Argument(help="The notification id.")],
    url: UrlOption = "http://127.0.0.1:8000",
    as_json: JsonOption = False,
) -> None:
    """Show a notification's deliveries: status, attempts, errors, history."""
    response = http_request("GET", f"{url}/v1/notifications/{notification_id}")
    if response.status_code != 200:
        fail(error_text(response))
    body = response.json()
    if as_json:
        print(json.dumps(body, indent=2))
        return
    from rich.table import Table

    console.print(f"notification {body['id']} type={body['type']} priority={body['priority']}")
    table = Table("channel", "address", "status", "attempts", "last error", "provider")
    for d in body["deliveries"]:
        table.add_row(
            d["channel"],
            d["address"],
            d["status"],
            str(d["attempts"]),
            d.get("lastError") or d.get("skipReason") or "",
            d.get("provider") or "",
        )
    console.print(table)


@app.command(cls=Command)
def providers(url: UrlOption = "http://127.0.0.1:8000", as_json: JsonOption = False) -> None:
    """Show each channel's failover chain and every account's circuit breaker."""
    response = http_request("GET", f"{url}/v1/providers")
    if response.status_code != 200:
        fail(error_text(response))
    body = response.json()
    if as_json:
        print(json.dumps(body, indent=2))
        return
    for channel, chain in body["chains"].items():
        console.print(f"{channel}: {' -> '.join(chain)}", highlight=False)
    from rich.table import Table

    # One table per dispatcher, its id above it: a column of ids would squeeze the others
    # out of a narrow terminal, and names are never cut (they go into configuration).
    rows: dict[str, list[tuple[str, ...]]] = {}
    for account in body["accounts"]:
        rate = account["ratePerSecond"]
        limits = ("-" if rate is None else f"{rate:g}", str(account["maxInFlight"] or "-"))
        for breaker in account["breakers"] or [None]:
            state = breaker["state"] if breaker else {}
            retry = state.get("retryInSeconds")
            dispatcher = breaker["dispatcher"] if breaker else "(no dispatcher reported)"
            rows.setdefault(dispatcher, []).append(
                (
                    account["name"],
                    account["kind"] or "?",
                    *limits,
                    state.get("state", ""),
                    "" if retry is None else f"{retry:.1f}s",
                )
            )
    for dispatcher, accounts in rows.items():
        console.print(f"dispatcher {dispatcher}", highlight=False, soft_wrap=True)
        table = Table()
        table.add_column("account", no_wrap=True)
        for header in ("kind", "rate/s", "in flight", "breaker", "retry in"):
            table.add_column(header)
        for row in accounts:
            table.add_row(*row)
        console.print(table)


dlq = new_typer("The dead-letter queue: deliveries that failed for good.")
app.add_typer(dlq, name="dlq")


@dlq.command("list", cls=Command)
def dlq_list(
    kind: Annotated[
        list[str] | None,
        typer.Option(metavar="KIND", help="exhausted, poison or permanent (repeat for more)."),
    ] = None,
    limit: Annotated[int, typer.Option(metavar="N", help="At most this many, newest first.")] = 100,
    url: UrlOption = "http://127.0.0.1:8000",
    as_json: JsonOption = False,
) -> None:
    """List failed deliveries (exhausted and poison by default)."""
    params: dict[str, Any] = {"limit": limit, "kind": kind or []}
    response = http_request("GET", f"{url}/v1/dead-letters", params=params)
    if response.status_code != 200:
        fail(error_text(response))
    if as_json:
        print(json.dumps(response.json(), indent=2))
        return
    from rich.table import Table

    # The id goes to `tidings dlq replay`: it is never cut, whatever the terminal's width;
    # the other columns wrap around it.
    table = Table(show_lines=True)
    table.add_column("delivery", no_wrap=True, min_width=36)
    table.add_column("channel / address", overflow="fold")
    table.add_column("kind / attempts")
    table.add_column("failed at / last error", overflow="fold")
    for d in response.json():
        table.add_row(
            d["id"],
            f"{d['channel']}\n{d['address']}",
            f"{d['failureKind'] or ''}\n{d['attempts']}",
            f"{d['failedAt']}\n{(d['lastError'] or '')[:200]}",
        )
    console.print(table)


@dlq.command("replay", cls=Command)
def dlq_replay(
    delivery_ids: Annotated[
        list[str], typer.Argument(metavar="DELIVERY_ID", help="Delivery ids to send again.")
    ],
    url: UrlOption = "http://127.0.0.1:8000",
) -> None:
    """Send failed deliveries again, with fresh attempts."""
    failed = False
    for delivery_id in delivery_ids:
        response = http_request("POST", f"{url}/v1/deliveries/{delivery_id}/replay")
        if response.status_code == 200:
            console.print(f"{delivery_id}: PENDING")
        else:
            failed = True
            console.print(f"{delivery_id}: {error_text(response)}", highlight=False)
    if failed:
        raise typer.Exit(1)


templates = new_typer("Templates: versioned words per type, channel and locale.")
app.add_typer(templates, name="templates")


@templates.command("apply", cls=Command)
def templates_apply(
    folder: Annotated[
        Path,
        typer.Argument(metavar="FOLDER", help="A folder of <type>/<channel>.<locale>.toml files."),
    ],
    url: UrlOption = "http://127.0.0.1:8000",
) -> None:
    """Upload every template file; a file equal to the newest version stores nothing."""
    from tidings.content.files import TemplateFileError, read_templates

    try:
        files = read_templates(folder)
    except TemplateFileError as error:
        fail(str(error))
        return
    failed = False
    for item in files:
        target = f"{url}/v1/templates/{item.type}/{item.channel}/{item.locale}"
        response = http_request("PUT", target, json=item.parts)
        if response.status_code in (200, 201):
            version = response.json()["version"]
            change = "new version" if response.status_code == 201 else "unchanged"
            console.print(f"{item.path}: version {version} ({change})", highlight=False)
        else:
            failed = True
            console.print(f"{item.path}: {error_text(response)}", highlight=False)
    if failed:
        raise typer.Exit(1)


app.command("simulate", cls=Command)(simulate)

# `tidings campaign ...` and `tidings keys ...` live in modules of their own, which add
# themselves to `app`; imported last, as they use the helpers above.
from tidings import campaign_cli, keys_cli, partitions_cli  # noqa: E402, F401


def main() -> None:
    _logging()  # every command: its records (and warnings) in the one format
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
