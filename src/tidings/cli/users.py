"""``tidings users import FILE``: user profiles from a CSV or JSON Lines file, sent to a
running API in batches (``POST /v1/users/batch``) under a progress bar."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from tidings.cli.common import (
    Command,
    UrlOption,
    console,
    error_text,
    fail,
    http_request,
    new_typer,
)

users = new_typer("User profiles in bulk.")

PROFILE_FIELDS = ("id", "email", "phone", "timezone", "locale")
_ITEM = re.compile(r"^users\.(\d+)(\..*)?$")

FileArgument = Annotated[
    Path,
    typer.Argument(
        metavar="FILE",
        exists=True,
        dir_okay=False,
        help="A .csv (a header row: id, email, phone, timezone, locale; any other column "
        "is an attribute) or a .jsonl file (one profile object per line, as the batch takes).",
    ),
]


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        for row in reader:
            profile: dict[str, Any] = {}
            attributes = {}
            for name, value in row.items():
                if name is None or value in (None, ""):
                    continue  # an extra cell with no header, or an empty one
                if name in PROFILE_FIELDS:
                    profile[name] = value
                else:
                    attributes[name] = value
            if attributes:
                profile["attributes"] = attributes
            yield reader.line_num, profile


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                profile = json.loads(line)
            except ValueError as error:
                fail(f"line {number}: not JSON ({error})")
            if not isinstance(profile, dict):
                fail(f"line {number}: not a JSON object")
            yield number, profile


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _csv_rows(path)
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl_rows(path)
    fail(f"{path.name}: give a .csv or a .jsonl file")
    raise AssertionError  # unreachable


def _count_lines(path: Path) -> int:
    with path.open("rb") as file:
        return sum(1 for line in file if line.strip())


@users.command("import", cls=Command)
def import_users(
    path: FileArgument,
    batch: Annotated[
        int, typer.Option(metavar="N", min=1, max=1000, help="Profiles per request.")
    ] = 1000,
    url: UrlOption = "http://127.0.0.1:8000",
) -> None:
    """Create or replace every profile of FILE (running it again is harmless: it replaces)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    total = _count_lines(path) - (1 if path.suffix.lower() == ".csv" else 0)
    created = replaced = 0
    columns = (TextColumn("users"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("import", total=max(total, 0))
        pending: list[tuple[int, dict[str, Any]]] = []
        for numbered in _rows(path):
            pending.append(numbered)
            if len(pending) == batch:
                created, replaced = _send(url, pending, created, replaced)
                progress.advance(task, len(pending))
                pending = []
        if pending:
            created, replaced = _send(url, pending, created, replaced)
            progress.advance(task, len(pending))
    console.print(f"imported {created + replaced} users: {created} created, {replaced} replaced")


def _send(
    url: str, pending: list[tuple[int, dict[str, Any]]], created: int, replaced: int
) -> tuple[int, int]:
    body = {"users": [profile for _, profile in pending]}
    response = http_request("POST", f"{url}/v1/users/batch", json=body, timeout=120)
    if response.status_code != 200:
        where = _line_of(response, pending)
        done = f"{created + replaced} imported before it (this batch: none)"
        fail(f"{where}{error_text(response)}; {done}")
    answer = response.json()
    return created + int(answer["created"]), replaced + int(answer["replaced"])


def _line_of(response: Any, pending: list[tuple[int, dict[str, Any]]]) -> str:
    """``line N: `` of the item the API's error names (``users.3.email``), else ""."""
    try:
        match = _ITEM.match(response.json()["error"]["field"] or "")
    except (ValueError, KeyError, TypeError):
        return ""
    if match is None or int(match.group(1)) >= len(pending):
        return ""
    return f"line {pending[int(match.group(1))][0]}: "
