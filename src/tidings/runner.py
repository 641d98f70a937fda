"""Running tidings: the API, the dispatcher, or both in one process (the embedded mode);
with the Kafka transport, a relay and a worker (a dispatcher whose lanes consume topics).
A process that runs the API also runs the bounce listener when ``bounces`` is set."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import ipaddress
import logging
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable, Coroutine, Generator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import uvicorn

from tidings import metrics
from tidings.api.app import create_app
from tidings.assembly import assemble_dispatcher
from tidings.background.producer_webhooks import ProducerWebhooks
from tidings.background.relay import Relay
from tidings.background.report_folding import ReportFolder
from tidings.clock import utcnow
from tidings.dispatch.lanes.kafka import WorkerPlan
from tidings.providers.chains import ProviderSet
from tidings.providers.smtp.adapter import bounce_accounts
from tidings.service import Service, providers_from_settings
from tidings.settings import Settings
from tidings.store import api_keys
from tidings.store.db_wait import wait_for_database
from tidings.store.engine import Database
from tidings.store.migrate import pending_upgrade, upgrade
from tidings.store.partitions import ensure_partitions
from tidings.tracking.bounce_listener import BounceListener

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: tidings stops API and dispatcher together."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def run(
    settings: Settings,
    *,
    api: bool,
    dispatch: bool,
    migrate: bool,
    relay: bool = False,
    worker: WorkerPlan | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Run until SIGTERM or SIGINT, then stop taking work and finish what is in flight.
    ``dispatch``: a direct dispatcher; ``relay`` and ``worker``: the Kafka transport's.
    ``sock``: a listening socket the API serves instead of binding host and port itself
    (``run_workers`` shares one among its processes)."""
    metrics.configure(settings.metrics_dir)  # before anything is counted
    service = Service.from_settings(settings)
    sends = dispatch or worker is not None
    providers = providers_from_settings(settings) if sends else ProviderSet({}, {})
    stop = asyncio.Event()
    jobs: list[Coroutine[Any, Any, None]] = []
    server: _Server | None = None
    try:
        await wait_for_database(service.db)  # PostgreSQL may still be starting
        if not migrate:
            await _check_schema(service)
        if api:  # before migrating: a refusal is told at once
            await _check_open_access(service)
        if migrate:
            await upgrade(service.db, partitions_ahead=settings.partitions_ahead)
        await _ensure_partitions(service)
        if api:
            config = uvicorn.Config(
                create_app(service),
                host=settings.host,
                port=settings.port,
                lifespan="off",
                access_log=settings.access_log,
                log_config=None,  # its loggers use tidings' format (tidings/logs.py)
            )
            server = _Server(config)
            jobs.append(server.serve(sockets=[sock] if sock is not None else None))
            if settings.bounces is not None:  # DSNs mailed to the SMTP accounts' return paths
                domain = settings.bounces.domain
                accounts = bounce_accounts(settings.accounts, domain)
                jobs.append(BounceListener(settings.bounces, service.db, accounts).run(stop))
        if dispatch:
            jobs.append(assemble_dispatcher(service, providers).run(stop))
        if relay:
            jobs.append(Relay(service).run(stop))
        if worker is not None:
            jobs.append(assemble_dispatcher(service, providers, worker=worker).run(stop))
        if sends:  # events to producers' webhook endpoints go out where deliveries do
            jobs.append(ProducerWebhooks(service.db, settings.webhooks).run(stop))
            jobs.append(ReportFolder(service.db).run(stop))
        _on_signals(stop, server)
        # What start-up built lives as long as the process: out of the collector's sight,
        # full collections stay short (they paused every request for 100-200 ms).
        gc.collect()
        gc.freeze()
        await asyncio.gather(*jobs)
    finally:
        try:
            await providers.close()
        finally:
            await service.close()


async def _ensure_partitions(service: Service) -> None:
    """Today's and the coming days' partitions, before accepting or sending: an insert
    never finds its day missing. Dispatchers keep them made (hourly); a failure here (the
    database away) is logged, not fatal, as the database being away is for the rest."""
    try:
        await ensure_partitions(service.db, utcnow().date(), service.settings.partitions_ahead)
    except Exception as error:
        log.warning("making the day partitions ahead failed (%s): dispatchers retry", error)


class StartRefused(Exception):
    """The process must not start as configured; the message says why and what to do."""


async def _check_schema(service: Service) -> None:
    """A process that does not migrate (api, dispatch, relay, worker) refuses a database
    behind the latest migration in one line, rather than fail at its first query."""
    reason = await pending_upgrade(service.db)
    if reason is not None:
        raise StartRefused(reason)


async def _keys_exist(db: Database) -> bool:
    """Whether any API key exists: none while the database has no key table (not migrated
    yet, which `serve` does after this check)."""
    async with db.engine.connect() as conn:
        has_table = await conn.run_sync(lambda sync: sa.inspect(sync).has_table("api_key"))
    return has_table and await api_keys.any_key(db)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


async def _check_open_access(service: Service) -> None:
    """Secure by default (docs/security.md): without API keys, the API serves loopback only,
    unless told otherwise (--no-auth); it says so when it starts open."""
    settings = service.settings
    if await _keys_exist(service.db):
        return
    where = f"{settings.host}:{settings.port}"
    if is_loopback(settings.host):
        log.warning(
            "no API keys exist: every request to %s is allowed (only this machine can reach it). "
            "`tidings keys create` makes the first key; from then on every request needs one",
            where,
        )
        return
    if not settings.allow_no_keys:
        raise StartRefused(
            f"refusing to serve {where} without API keys: anyone who reaches it could send to "
            "every user. Create a key first (`tidings migrate` then `tidings keys create --name "
            "admin --scopes all`), or start with --no-auth behind a gateway that authenticates"
        )
    log.warning("--no-auth: serving %s without API keys; every request is allowed", where)


def _on_signals(stop: asyncio.Event, server: uvicorn.Server | None) -> None:
    loop = asyncio.get_running_loop()

    def shut_down(name: str) -> None:
        log.info("%s received: finishing in-flight work", name)
        stop.set()
        if server is not None:
            server.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, shut_down, sig.name)


def listening_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A socket bound and listening on ``host:port`` (uvicorn's backlog), inherited by forks:
    every worker accepts from this one queue, so the kernel hands each connection to
    whichever worker is free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def run_workers(
    count: int, settings: Settings, serve: Callable[[Settings, socket.socket], None]
) -> int:
    """``count`` API processes on one port: bind once, fork ``count`` children that each
    run ``serve(settings, sock)``, forward SIGTERM and SIGINT to them and wait. A child that
    exits on its own stops the others (the supervisor, systemd or Kubernetes, restarts the
    whole). Returns the exit code. Without a metrics directory one is made for the run, so
    each worker's /metrics adds up all of them (docs/operations.md, Metrics)."""
    own_metrics_dir: Path | None = None
    if settings.metrics_dir is None and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        own_metrics_dir = Path(tempfile.mkdtemp(prefix="tidings-metrics-"))
        settings = settings.model_copy(update={"metrics_dir": own_metrics_dir})
    sock = listening_socket(settings.host, settings.port)
    children: set[int] = set()
    stopping = False

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for _ in range(count):
            children.add(_fork_worker(settings, sock, serve))
        log.info("serving %s:%d with %d workers", settings.host, settings.port, count)
        code = 0
        while children:
            pid, status = os.wait()  # a signal's handler runs, then the wait goes on
            children.discard(pid)
            exit_code = os.waitstatus_to_exitcode(status)
            if not stopping:
                log.error("API worker %d exited (%d): stopping the others", pid, exit_code)
                code = exit_code or 1
                forward(signal.SIGTERM, None)
        return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
        if own_metrics_dir is not None:
            shutil.rmtree(own_metrics_dir, ignore_errors=True)


def _fork_worker(
    settings: Settings, sock: socket.socket, serve: Callable[[Settings, socket.socket], None]
) -> int:
    """Fork one worker; in the child, never return: run ``serve`` and exit with its code.
    Forked before any event loop or thread exists in the parent, so nothing is half-held."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        # The parent's forwarding handler means nothing here; the child's loop sets its own.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        serve(settings, sock)
        code = 0
    except SystemExit as exited:
        code = exited.code if isinstance(exited.code, int) else 1
    except BaseException:
        log.exception("API worker failed")
    finally:
        # os._exit skips atexit: run it for the metrics' mark_process_dead, flush the logs.
        atexit._run_exitfuncs()
        logging.shutdown()
        os._exit(code)
