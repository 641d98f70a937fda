"""The ``tidings`` command line: the typer app, each command and group added from its own
module (``tidings.cli.*``), and ``main``, the console script.

Every `tidings` call imports this module and so every command module, `--help` too: what a
command needs (the settings, the store, the API, httpx) is imported inside it, so a call
pays only for its own.
"""

from __future__ import annotations

import sys

from tidings.cli import (
    calls,
    campaigns,
    database,
    dlq,
    keys,
    partitions,
    serve,
    templates,
    users,
)
from tidings.cli.common import Command, configure_logging, new_typer
from tidings.cli.webhooks import webhook_secret
from tidings.simulator.cli import simulate

app = new_typer("tidings: durable multi-channel notifications.")

# In the order `tidings --help` lists them (commands, then groups).
for command in (
    serve.serve,
    serve.api,
    serve.dispatch,
    serve.relay,
    serve.worker,
    database.migrate,
    database.retention,
):
    app.command(cls=Command)(command)
app.command("webhook-secret", cls=Command)(webhook_secret)
app.command(cls=Command)(calls.send)
app.command(cls=Command)(calls.status)
app.command(cls=Command)(calls.cancel)
app.command(cls=Command)(calls.providers)
app.command("simulate", cls=Command)(simulate)

app.add_typer(dlq.dlq, name="dlq")
app.add_typer(templates.templates, name="templates")
app.add_typer(campaigns.campaign, name="campaign")
app.add_typer(keys.keys, name="keys")
app.add_typer(partitions.partitions, name="partitions")
app.add_typer(users.users, name="users")


def main() -> None:
    configure_logging()  # every command: its records (and warnings) in the one format
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
