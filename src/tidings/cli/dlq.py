"""``tidings dlq``: list and replay the dead-letter queue through a running API."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from tidings.cli.common import (
    Command,
    JsonOption,
    UrlOption,
    console,
    error_text,
    fail,
    http_request,
    new_typer,
)

dlq = new_typer("The dead-letter queue: deliveries that failed for good.")


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
