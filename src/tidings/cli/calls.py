"""Commands that call a running API: ``tidings send``, ``status`` and ``providers``."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

import typer

from tidings.cli.common import JsonOption, UrlOption, console, error_text, fail, http_request


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
    cancel_key: Annotated[
        str | None,
        typer.Option(metavar="KEY", help="A workflow's cancel key (see `tidings cancel`)."),
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
    optional = {
        "userId": user,
        "to": to or None,
        "channels": channel,
        "priority": priority,
        "cancelKey": cancel_key,
    }
    payload.update({k: v for k, v in optional.items() if v})
    headers = {"Idempotency-Key": key or str(uuid.uuid4())}
    response = http_request("POST", f"{url}/v1/notifications", json=payload, headers=headers)
    if response.status_code != 202:
        fail(error_text(response))
    print(response.json()["id"])


def cancel(
    key: Annotated[str, typer.Argument(metavar="KEY", help="The notifications' cancelKey.")],
    url: UrlOption = "http://127.0.0.1:8000",
) -> None:
    """End the workflow steps not yet run of the notifications sent with this cancel key
    (docs/workflows.md); print how many notifications had one."""
    body = {"cancelKey": key}
    response = http_request("POST", f"{url}/v1/notifications/cancel", json=body)
    if response.status_code != 200:
        fail(error_text(response))
    print(response.json()["cancelled"])


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
