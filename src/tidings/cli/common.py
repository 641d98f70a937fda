"""What every command module of the ``tidings`` command line shares: the command class,
the common options, settings and errors, and the calls to a running API."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperCommand

from tidings import logs

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


def load_settings(config: Path | None, **overrides: Any) -> Settings:
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


def configure_logging() -> None:
    """JSON lines off a terminal, the human format on one (docs/operations.md, Logs)."""
    logs.configure()


T = TypeVar("T")


def in_database(config: Path | None, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work`` on the configured database, once it is migrated (the commands that work
    on the database itself, not through the API: keys, partitions)."""
    from tidings.store.engine import connect
    from tidings.store.migrate import is_current

    settings = load_settings(config)

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
