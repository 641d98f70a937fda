"""The long-running processes: ``tidings serve``, ``api``, ``dispatch``, ``relay`` and
``worker``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tidings.cli.common import (
    ConfigOption,
    HostOption,
    NoAuthOption,
    PortOption,
    configure_logging,
    fail,
    load_settings,
)

if TYPE_CHECKING:
    from tidings.settings import Settings


def _run(settings: Settings, api: bool, dispatch: bool, migrate: bool, **kafka: Any) -> None:
    """``kafka``: ``relay=True`` and/or ``worker=WorkerPlan(...)``, or ``sock`` (runner.run)."""
    from tidings.runner import StartRefused, run

    configure_logging()
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
    settings = load_settings(config)
    if settings.transport != "kafka":
        fail(
            f"tidings {command} is part of the Kafka transport: set TIDINGS_TRANSPORT=kafka "
            "and TIDINGS_KAFKA_BOOTSTRAP (and a PostgreSQL TIDINGS_DATABASE_URL)"
        )
    return settings


def _plan(settings: Settings, lanes: str | None = None, channels: str | None = None) -> Any:
    from tidings.dispatch.lanes.kafka import WorkerPlan
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


def serve(
    config: ConfigOption = None,
    host: HostOption = None,
    port: PortOption = None,
    no_auth: NoAuthOption = False,
) -> None:
    """Run everything in one process: migrate, the API and the dispatcher (embedded mode;
    with the Kafka transport, the API, a relay and a worker)."""
    settings = load_settings(config, host=host, port=port, allow_no_keys=no_auth or None)
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


def api(
    config: ConfigOption = None,
    host: HostOption = None,
    port: PortOption = None,
    no_auth: NoAuthOption = False,
    workers: WorkersOption = 1,
) -> None:
    """Run only the HTTP API (server mode; run `tidings migrate` first). With --workers N,
    N processes accept on one port, as behind a load balancer but on one machine."""
    settings = load_settings(config, host=host, port=port, allow_no_keys=no_auth or None)
    if workers == 1:
        _run(settings, api=True, dispatch=False, migrate=False)
        return
    from tidings.runner import run_workers

    configure_logging()
    code = run_workers(workers, settings, _serve_api_worker)
    if code:
        raise typer.Exit(code)


def _serve_api_worker(settings: Settings, sock: Any) -> None:
    """One of ``api --workers``'s processes, on the socket its parent bound."""
    try:
        _run(settings, api=True, dispatch=False, migrate=False, sock=sock)
    except typer.Exit as exited:  # fail(): the message is printed, the code is the child's
        raise SystemExit(exited.exit_code) from None


def dispatch(config: ConfigOption = None) -> None:
    """Run only a dispatcher; any number may share one PostgreSQL database."""
    settings = load_settings(config)
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


def relay(config: ConfigOption = None) -> None:
    """Kafka transport: publish due deliveries to the priority topics (any number of relays
    may run); also expands campaigns and returns expired leases."""
    _run(_kafka_settings(config, "relay"), api=False, dispatch=False, migrate=False, relay=True)


def worker(
    config: ConfigOption = None, lanes: LanesOption = None, channels: ChannelsOption = None
) -> None:
    """Kafka transport: consume the priority topics and send (one consumer group per lane)."""
    settings = _kafka_settings(config, "worker")
    plan = _plan(settings, lanes, channels)
    _run(settings, api=False, dispatch=False, migrate=False, worker=plan)
