"""``tidings simulate``: run the provider simulator in the foreground until SIGINT/SIGTERM.

Options override the TOML file (``--config``, the fields of ``SimulatorConfig``), which
overrides this command's defaults (HTTP on 9900, SMTP on 2525). The simulator's modules are
imported when the command runs, so that they do not slow every other ``tidings`` command.
"""

from __future__ import annotations

import asyncio
import signal
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator, SimulatorConfig

DEFAULTS: dict[str, Any] = {
    "http_port": 9900,
    "smtp_port": 2525,
    "credentials_dir": Path("./simulator-credentials"),
    "tidings_url": "http://127.0.0.1:8000",
}
console = Console()


def simulate(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="Simulator TOML file.",
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(metavar="HOST", help="Interface to listen on [default: 127.0.0.1]."),
    ] = None,
    http_port: Annotated[
        int | None,
        typer.Option(metavar="PORT", help="Port of every HTTP provider [default: 9900]."),
    ] = None,
    smtp_port: Annotated[
        int | None, typer.Option(metavar="PORT", help="Port of the SMTP server [default: 2525].")
    ] = None,
    credentials_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Where keys and certificates go [default: ./simulator-credentials]."
        ),
    ] = None,
    write_config: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="Write a tidings configuration using the simulator to this file."
        ),
    ] = None,
    tidings_url: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Where tidings listens (its public_url): SendGrid events and Twilio replies "
            "are posted there [default: http://127.0.0.1:8000].",
        ),
    ] = None,
) -> None:
    """Run simulated SendGrid, SMTP, Twilio, FCM, APNs and webhook receivers locally."""
    options = {
        "host": host,
        "http_port": http_port,
        "smtp_port": smtp_port,
        "credentials_dir": credentials_dir,
        "tidings_url": tidings_url,
    }
    settings = load_config(config, options)
    code = asyncio.run(run(settings, write_config))
    if code:
        raise typer.Exit(code)


def load_config(path: Path | None, options: dict[str, Any]) -> SimulatorConfig:
    """The file's settings under the given options, over the command's defaults."""
    from pydantic import ValidationError

    from tidings.simulator.server import SimulatorConfig

    values: dict[str, Any] = dict(DEFAULTS)
    try:
        if path is not None:
            values |= tomllib.loads(path.read_text())
        values |= {k: v for k, v in options.items() if v is not None}
        settings = SimulatorConfig.model_validate(values)
    except (tomllib.TOMLDecodeError, ValidationError) as error:
        console.print(f"[red]error:[/red] {path}: {error}", highlight=False)
        raise typer.Exit(2) from error
    # Absolute, so that the written tidings configuration works from any directory.
    settings.credentials_dir = settings.credentials_dir.resolve()
    return settings


async def run(settings: SimulatorConfig, write_config: Path | None) -> int:
    """Serve until SIGINT or SIGTERM; 0 after a clean stop, 1 when it cannot listen."""
    from tidings.simulator import tidings_config
    from tidings.simulator.server import Simulator

    sim = Simulator(settings)
    try:
        await sim.start()
    except OSError as error:
        await sim.stop()
        console.print(f"[red]error:[/red] cannot listen: {error}", highlight=False)
        return 1
    try:
        if write_config is not None:
            tidings_config.write(sim, write_config)
        describe(sim, write_config)
        await _until_signalled()
    finally:
        await sim.stop()
    console.print("simulator stopped")
    return 0


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def describe(sim: Simulator, written: Path | None) -> None:
    """Where each provider listens, the control API, and what to do next."""
    from rich.table import Table

    from tidings.simulator import tidings_config

    url = tidings_config.base_url(sim)
    smtp_port = sim.servers["smtp"].port
    table = Table("provider", "endpoint", "account in --write-config", title="tidings simulator")
    table.add_row(
        "smtp",
        f"smtp://{tidings_config.client_host(sim.config.host)}:{smtp_port} ({sim.config.smtp_tls})",
        "smtp-sim",
    )
    table.add_row("sendgrid", f"POST {url}/v3/mail/send", "sendgrid-sim")
    table.add_row("mailgun", f"POST {url}/v3/{{domain}}/messages", "mailgun-sim")
    table.add_row("postmark", f"POST {url}/email", "postmark-sim")
    table.add_row("resend", f"POST {url}/emails (Idempotency-Key)", "resend-sim")
    table.add_row("sparkpost", f"POST {url}/api/v1/transmissions", "sparkpost-sim")
    table.add_row("ses", f"POST {url}/v2/email/outbound-emails (SigV4)", "ses-sim")
    table.add_row("twilio", f"POST {url}/2010-04-01/Accounts/{{sid}}/Messages.json", "twilio-sim")
    table.add_row("vonage", f"POST {url}/v1/messages", "vonage-sim")
    table.add_row("fcm", f"POST {url}/v1/projects/{{project}}/messages:send", "fcm-sim")
    table.add_row("apns", f"POST {url}/3/device/{{token}} (HTTP/2)", "apns-sim")
    table.add_row("webpush", f"POST {url}/webpush/{{id}}", "webpush-sim")
    table.add_row("webhook", f"POST {url}/webhook-receiver/{{name}}", "webhook-sim")
    console.print(table)
    console.print("[bold]control API[/bold]", highlight=False)
    for line in (
        f"  GET   {url}/_sim/counts                  what each provider received",
        f"  GET   {url}/_sim/{{provider}}/messages     the messages it accepted",
        f"  PATCH {url}/_sim/{{provider}}/behaviour    latency, errors, rate_limit, down …",
        f"  POST  {url}/_sim/{{provider}}/script       the next errors for one address",
        f"  POST  {url}/_sim/reset                   forget messages, counts and scripts",
    ):
        console.print(line, highlight=False, soft_wrap=True)
    console.print(f"credentials in {sim.config.credentials_dir}", highlight=False)
    if sim.config.sendgrid_events_url():
        console.print(
            f"events and replies posted to tidings at {sim.config.tidings_url or '(set URLs)'}",
            highlight=False,
        )
    if written is not None:
        console.print(
            f"tidings configuration written to {written}; run: tidings serve --config {written}",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print("add --write-config tidings.toml for a tidings configuration using it")
    console.print("simulator ready; Ctrl-C stops it", highlight=False)
