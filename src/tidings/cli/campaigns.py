"""``tidings campaign``: create, forecast, watch, cancel, resume and list campaigns through a
running API (``/v1/campaigns``)."""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

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

if TYPE_CHECKING:  # imported where used: every `tidings` call loads this module
    import httpx
    from rich.console import RenderableType
    from rich.progress import TaskID

campaign = new_typer("Campaigns: one notification type sent to a whole audience.")
# The Idempotency-Key made up for `create` (and the --watch bar with --json) goes to stderr:
# stdout stays the answer.
notes = Console(stderr=True)

FINAL = ("DONE", "CANCELLED")
# Where a watch stops: a final status, or PAUSED by the reputation guard (resume goes on).
STOPPED = (*FINAL, "PAUSED")
# The dry run's histogram is drawn in at most this many rows (adjacent buckets merged).
HISTOGRAM_ROWS = 20
# A cancel waits for the deliveries being sent (cancel_wait_seconds, up to 600 s).
CANCEL_TIMEOUT = 660.0

IdArgument = Annotated[str, typer.Argument(metavar="CAMPAIGN_ID", help="The campaign id.")]


def _answer(response: httpx.Response, *expected: int) -> dict[str, Any]:
    """The JSON body of an expected answer; any other prints the API's error and exits 1."""
    if response.status_code not in expected:
        fail(error_text(response))
    try:
        body: dict[str, Any] = response.json()
    except ValueError:
        fail(f"{response.status_code}: the answer is not JSON: {response.text[:200]}")
        raise  # unreachable; keeps type checkers content
    return body


def _json_option(text: str | None, option: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        fail(f"{option} is not valid JSON: {error}")


def _print_json(body: Any) -> None:
    print(json.dumps(body, indent=2))


# create and dry-run: one set of options, one request body.


def _campaign_command(dry_run: bool) -> Callable[..., None]:
    def command(
        type_: Annotated[
            str, typer.Option("--type", metavar="TYPE", help="Notification type name.")
        ],
        topic: Annotated[
            str | None, typer.Option(metavar="TOPIC", help="Audience: the topic's followers.")
        ] = None,
        user: Annotated[
            list[str] | None,
            typer.Option(metavar="ID", help="Audience: this user id (repeat for more)."),
        ] = None,
        segment: Annotated[
            str | None,
            typer.Option(
                metavar="JSON",
                help='Audience: profiles matching a segment, e.g. \'{"field": "city", '
                '"equals": "Recife"}\'.',
            ),
        ] = None,
        name: Annotated[str | None, typer.Option(metavar="NAME", help="A name to know it by.")] = (
            None
        ),
        data: Annotated[
            str, typer.Option(metavar="JSON", help="Template data as a JSON object.")
        ] = "{}",
        channel: Annotated[
            list[str] | None,
            typer.Option(
                metavar="CHANNEL",
                help="Only this channel, repeatable [default: the type's].",
            ),
        ] = None,
        priority: Annotated[
            str | None,
            typer.Option(metavar="PRIORITY", help="high, normal or low [default: low]."),
        ] = None,
        send_at: Annotated[
            str | None,
            typer.Option(metavar="TIME", help="Start, ISO 8601 with a time zone [default: now]."),
        ] = None,
        spread_over: Annotated[
            str | None,
            typer.Option(
                metavar="DURATION",
                help="Spread the sends over '30m', '1h30m', '90s' or ISO 8601 'PT30M' "
                "(at most 7 days).",
            ),
        ] = None,
        local_time: Annotated[
            str | None,
            typer.Option(metavar="HH:MM", help="At this time in each user's own time zone."),
        ] = None,
        timezone: Annotated[
            str | None,
            typer.Option(metavar="ZONE", help="Time zone of users who have none [default: UTC]."),
        ] = None,
        key: Annotated[
            str | None, typer.Option(metavar="KEY", help="Idempotency key [default: random].")
        ] = None,
        url: UrlOption = "http://127.0.0.1:8000",
        as_json: JsonOption = False,
    ) -> None:
        audiences = [a for a in (topic, user, segment) if a]
        if len(audiences) != 1:
            fail("give exactly one audience: --topic, --user (repeatable) or --segment")
        audience = (
            {"topic": topic}
            if topic
            else {"userIds": user}
            if user
            else {"segment": _json_option(segment, "--segment")}
        )
        optional = {
            "name": name,
            "data": _json_option(data, "--data"),
            "channels": channel,
            "priority": priority,
            "sendAt": send_at,
            "spreadOver": spread_over,
            "localTime": local_time,
            "timezone": timezone,
        }
        body = {"type": type_, "audience": audience}
        body.update({k: v for k, v in optional.items() if v is not None})
        headers = {"Idempotency-Key": key or str(uuid.uuid4())}
        if key is None and not dry_run:
            # Before the request: after a timeout, a retry with this key is safe.
            notes.print(f"Idempotency-Key: {headers['Idempotency-Key']}", highlight=False)
        target = f"{url}/v1/campaigns"
        if dry_run:
            params = {"dryRun": "true"}
            forecast = _answer(
                http_request("POST", target, json=body, headers=headers, params=params), 200
            )
            if as_json:
                _print_json(forecast)
            else:
                _print_forecast(forecast)
            return
        answer = _answer(http_request("POST", target, json=body, headers=headers), 202)
        if as_json:
            _print_json(answer)
        else:
            console.print(f"campaign {answer['campaignId']} {answer['status']}", highlight=False)

    command.__doc__ = (
        "Forecast a campaign without storing it: deliveries, skips and the sending curve."
        if dry_run
        else "Schedule a campaign and print its id and status."
    )
    return command


campaign.command("create", cls=Command)(_campaign_command(dry_run=False))
campaign.command("dry-run", cls=Command)(_campaign_command(dry_run=True))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _counts(counts: dict[str, int], separator: str = ", ") -> str:
    return separator.join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def _print_forecast(forecast: dict[str, Any]) -> None:
    from rich.bar import Bar
    from rich.table import Table

    console.print(
        f"dry run: {forecast['audienceSize']} users in the audience (nothing was stored)",
        highlight=False,
    )
    table = Table("channel", "deliveries", "would send", "skipped", "quiet hours", "time")
    for c in forecast["channels"]:
        table.add_row(
            c["channel"],
            str(c["deliveries"]),
            str(c["wouldSend"]),
            _counts(c["skipped"], "\n"),
            str(c["deferredByQuietHours"]),
            _duration(c["estimatedSeconds"]),
        )
    console.print(table)
    buckets = forecast["histogram"]
    if not buckets:
        return
    # Merge adjacent buckets so that the chart stays small.
    group = math.ceil(len(buckets) / HISTOGRAM_ROWS)
    width = forecast["bucketSeconds"] * group
    rows = [
        (buckets[i]["start"], sum(b["count"] for b in buckets[i : i + group]))
        for i in range(0, len(buckets), group)
    ]
    peak = max(count for _start, count in rows) or 1
    chart = Table(title=f"sends per {_duration(width)} (UTC)", show_edge=False)
    chart.add_column("from", no_wrap=True)
    chart.add_column("sends", justify="right")
    chart.add_column("", ratio=1)
    pattern = "%H:%M:%S" if width < 60 else "%Y-%m-%d %H:%M"
    for start, count in rows:
        shown = datetime.fromisoformat(start).astimezone(UTC).strftime(pattern)
        chart.add_row(shown, str(count), Bar(size=peak, begin=0, end=count, color="cyan"))
    console.print(chart)


# status (and --watch), cancel, list.


def _fetch(url: str, campaign_id: str) -> dict[str, Any]:
    return _answer(http_request("GET", f"{url}/v1/campaigns/{campaign_id}"), 200)


def _when(text: str | None) -> str:
    if not text:
        return "-"
    return datetime.fromisoformat(text).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _print_campaign(body: dict[str, Any]) -> None:
    from rich.table import Table

    console.print(f"campaign {body['campaignId']}", highlight=False, soft_wrap=True)
    size = body["audienceSize"]
    rows = [
        ("name", body["name"] or "-"),
        ("type", body["type"]),
        ("status", body["status"]),
        ("priority", body["priority"]),
        ("channels", ", ".join(body["channels"])),
        ("audience", json.dumps(body["audience"])),
        ("send at", _when(body["sendAt"])),
        ("spread over", _duration(body["spreadSeconds"]) if body["spreadSeconds"] else "-"),
        ("local time", body["localTime"] or "-"),
        ("audience size", "-" if size is None else str(size)),
        ("users expanded", f"{body['expanded']}/{'?' if size is None else size}"),
        ("deliveries", str(body["deliveries"])),
        ("by status", _counts(body["byStatus"])),
        ("skipped by reason", _counts(body["skippedByReason"])),
        ("deliveries done", f"{body['percentDone']:g}%"),
        ("estimated finish", _when(body["estimatedFinish"])),
        ("created", _when(body["createdAt"])),
        ("started", _when(body["startedAt"])),
        ("finished", _when(body["finishedAt"])),
    ]
    if body.get("pausedReason"):
        rows.insert(3, ("paused because", body["pausedReason"]))
    table = Table("field", "value")
    table.columns[1].overflow = "fold"
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _finished(body: dict[str, Any]) -> int:
    by_status = body["byStatus"]
    return sum(n for s, n in by_status.items() if s not in ("PENDING", "QUEUED", "SENDING"))


def _watch(url: str, campaign_id: str, screen: Console) -> tuple[dict[str, Any], bool]:
    """Show a live progress bar until the campaign is DONE or CANCELLED; (the last answer,
    whether Ctrl-C stopped it). The bar is the deliveries' (the API's percentDone); the
    audience's expansion is a labelled count on a line of its own, never a second bar."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
    from rich.text import Text

    class Watch(Progress):
        def get_renderables(self) -> Iterator[RenderableType]:
            yield self.make_tasks_table(self.tasks)
            for task in self.tasks:
                yield Text(f"users expanded {task.fields['expanded']}")

    body = _fetch(url, campaign_id)
    first, started = _finished(body), time.monotonic()
    progress = Watch(
        TextColumn("{task.description}"),
        BarColumn(bar_width=None),  # what the counts leave of the line
        TaskProgressColumn(),
        TextColumn("deliveries {task.fields[done]}"),
        TextColumn("sent {task.fields[sent]}"),
        TextColumn("failed {task.fields[failed]}"),
        TextColumn("{task.fields[rate]}/s"),
        TextColumn("ETA {task.fields[eta]}"),
        console=screen,
        refresh_per_second=1,
        expand=True,
    )

    def update(task: TaskID, body: dict[str, Any]) -> None:
        by_status = body["byStatus"]
        elapsed = time.monotonic() - started
        rate = (_finished(body) - first) / elapsed if elapsed > 0 else 0.0
        finish = body["estimatedFinish"]
        eta = (
            (datetime.fromisoformat(finish) - datetime.now(UTC)).total_seconds()
            if finish and body["status"] not in FINAL
            else 0.0
        )
        size = body["audienceSize"]
        progress.update(
            task,
            description=body["status"],
            total=100,
            completed=body["percentDone"],
            done=f"{_finished(body)}/{body['deliveries']}",
            expanded=f"{body['expanded']}/{'?' if size is None else size}",
            sent=sum(by_status.get(s, 0) for s in ("SENT", "DELIVERED", "BOUNCED")),
            failed=by_status.get("FAILED", 0),
            rate=f"{rate:.1f}",
            eta=_duration(max(0.0, eta)),
        )

    fields: dict[str, Any] = {
        "done": "",
        "expanded": "",
        "sent": 0,
        "failed": 0,
        "rate": "0.0",
        "eta": "-",
    }
    try:
        with progress:
            task = progress.add_task(body["status"], total=None, **fields)
            update(task, body)
            while body["status"] not in STOPPED:
                time.sleep(1)
                body = _fetch(url, campaign_id)
                update(task, body)
    except KeyboardInterrupt:
        return _fetch(url, campaign_id), True
    return body, False


@campaign.command("status", cls=Command)
def campaign_status(
    campaign_id: IdArgument,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", help="Show live progress, every second, until DONE, CANCELLED or PAUSED."
        ),
    ] = False,
    url: UrlOption = "http://127.0.0.1:8000",
    as_json: JsonOption = False,
) -> None:
    """Show a campaign: status, audience, expanded, deliveries by status, percent done, ETA."""
    interrupted = False
    if watch:
        # With --json the bar goes to stderr: stdout is the JSON alone.
        body, interrupted = _watch(url, campaign_id, notes if as_json else console)
    else:
        body = _fetch(url, campaign_id)
    if as_json:
        _print_json(body)
    else:
        _print_campaign(body)
    if interrupted:
        raise typer.Exit(130)


@campaign.command("cancel", cls=Command)
def campaign_cancel(
    campaign_id: IdArgument,
    url: UrlOption = "http://127.0.0.1:8000",
    as_json: JsonOption = False,
) -> None:
    """Stop a campaign: nothing more of it is sent. Prints its final counts (the same for a
    finished or already cancelled campaign)."""
    target = f"{url}/v1/campaigns/{campaign_id}/cancel"
    body = _answer(http_request("POST", target, timeout=CANCEL_TIMEOUT), 200)
    if as_json:
        _print_json(body)
        return
    from rich.table import Table

    console.print(f"campaign {body['campaignId']} {body['status']}", highlight=False)
    table = Table("sent", "cancelled", "skipped", "failed", "expired", "in progress")
    table.add_row(
        *(str(body[k]) for k in ("sent", "cancelled", "skipped", "failed", "expired", "inProgress"))
    )
    console.print(table)


@campaign.command("resume", cls=Command)
def campaign_resume(
    campaign_id: IdArgument,
    url: UrlOption = "http://127.0.0.1:8000",
    as_json: JsonOption = False,
) -> None:
    """Continue a campaign its reputation guard paused (too many complaints or hard
    bounces): its held deliveries are sent. Prints the campaign."""
    body = _answer(http_request("POST", f"{url}/v1/campaigns/{campaign_id}/resume"), 200)
    if as_json:
        _print_json(body)
        return
    _print_campaign(body)


@campaign.command("list", cls=Command)
def campaign_list(
    limit: Annotated[
        int, typer.Option(metavar="N", help="At most this many (1-500), newest first.")
    ] = 50,
    after: Annotated[
        str | None,
        typer.Option(metavar="CURSOR", help="The page after this cursor (printed as 'next')."),
    ] = None,
    url: UrlOption = "http://127.0.0.1:8000",
    as_json: JsonOption = False,
) -> None:
    """List campaigns, newest first."""
    params: dict[str, Any] = {"limit": limit, **({"after": after} if after else {})}
    body = _answer(http_request("GET", f"{url}/v1/campaigns", params=params), 200)
    if as_json:
        _print_json(body)
        return
    from rich.table import Table

    # The id goes to `tidings campaign status`: it is never cut, whatever the terminal's
    # width; the other columns wrap around it.
    table = Table(show_lines=True)
    table.add_column("campaign / name", no_wrap=True, min_width=36)
    table.add_column("type / status", overflow="fold")
    table.add_column("users / deliveries")
    table.add_column("send at (UTC)")
    for c in body["campaigns"]:
        size = "?" if c["audienceSize"] is None else str(c["audienceSize"])
        send_at = datetime.fromisoformat(c["sendAt"]).astimezone(UTC)
        table.add_row(
            f"{c['campaignId']}\n{c['name'] or ''}",
            f"{c['type']}\n{c['status']}",
            f"{c['expanded']}/{size}\n{c['deliveries']}",
            f"{send_at:%Y-%m-%d}\n{send_at:%H:%M:%S}",
        )
    console.print(table)
    if body["next"]:
        console.print(f"next: --after {body['next']}", highlight=False, soft_wrap=True)
