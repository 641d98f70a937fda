"""``tidings keys``: create, list and revoke API keys (docs/security.md), straight in the
database the configuration names (no running API needed)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Annotated

import typer

from tidings.cli.common import (
    Command,
    ConfigOption,
    JsonOption,
    console,
    fail,
    in_database,
    load_settings,
    new_typer,
)

if TYPE_CHECKING:  # imported where used: every `tidings` call loads this module
    from tidings.store.api_keys import StoredKey
    from tidings.store.engine import Database

keys = new_typer("API keys: who may call the API, with which scopes, in which namespace.")

# api.auth.Scope's values (a test holds them equal), spelled out here because the help is
# built when this module loads, and importing the API (FastAPI) would slow every command.
SCOPE_NAMES = ("send", "read", "campaigns", "templates", "users", "admin", "metrics")
SCOPES_HELP = "Comma-separated: " + ", ".join(SCOPE_NAMES) + "; or all."


def _scopes(text: str) -> tuple[str, ...]:
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    if names == ["all"]:
        return SCOPE_NAMES
    known = set(SCOPE_NAMES)
    for name in names:
        if name not in known:
            fail(f"--scopes: unknown scope {name!r} ({SCOPES_HELP})")
    if not names:
        fail(f"--scopes: name at least one ({SCOPES_HELP})")
    return tuple(dict.fromkeys(names))


@keys.command("create", cls=Command)
def create(
    name: Annotated[str, typer.Option(metavar="NAME", help="Who the key is for (unique).")],
    scopes: Annotated[str, typer.Option(metavar="SCOPES", help=SCOPES_HELP)],
    namespace: Annotated[
        str | None,
        typer.Option(
            metavar="NAMESPACE",
            help="Whose notifications the key sends and sees [default: the configured one].",
        ),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            metavar="PER_SECOND", help="Notifications per second the key may submit (429 over)."
        ),
    ] = None,
    if_no_keys: Annotated[
        bool,
        typer.Option(
            "--if-no-keys",
            help="Only while no key exists (a deployment's first key, docker-compose.yml): "
            "once any key was created, do nothing and exit 0.",
        ),
    ] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API key and print it: it is shown this once, and stored only hashed."""
    from tidings.api.auth import issue_key
    from tidings.store import api_keys
    from tidings.store.api_keys import NameTaken

    if not 1 <= len(name) <= 100:
        fail("--name: 1 to 100 characters")
    if rate is not None and not (0 < rate <= 1_000_000 and math.isfinite(rate)):
        fail("--rate: a number of notifications per second above 0, at most 1000000")
    chosen = _scopes(scopes)
    space = namespace if namespace is not None else load_settings(config).namespace
    if not 1 <= len(space) <= 100:
        fail("--namespace: 1 to 100 characters")
    key, stored = issue_key(name, chosen, space, rate)

    async def insert(db: Database) -> bool:
        if if_no_keys and await api_keys.any_key(db):
            return False
        try:
            await api_keys.insert(db, stored)
        except NameTaken:
            fail(f"--name: a key named {name!r} exists already (names stay taken after revoke)")
        return True

    if not in_database(config, insert):
        typer.echo("--if-no-keys: keys exist already, none created", err=True)
        return
    if as_json:
        print(json.dumps({**_listed(stored), "key": key}))
        return
    print(key)
    console.print(
        f"[dim]key {name!r} ({', '.join(chosen)}; namespace {space!r}): shown once, "
        "keep it now. Use it as: Authorization: Bearer <key> (the CLI reads TIDINGS_API_KEY)[/dim]",
        highlight=False,
        soft_wrap=True,
    )


def _listed(key: StoredKey) -> dict[str, object]:
    return {
        "id": str(key.id),
        "name": key.name,
        "prefix": key.prefix,
        "namespace": key.namespace,
        "scopes": list(key.scopes),
        "rate": key.accept_rate,
        "createdAt": key.created_at.isoformat(),
        "revokedAt": key.revoked_at.isoformat() if key.revoked_at else None,
    }


@keys.command("list", cls=Command)
def list_keys(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Every key (never the key itself: its first characters), revoked ones too."""
    from rich.table import Table

    from tidings.store import api_keys

    found = in_database(config, api_keys.all_keys)
    if as_json:
        print(json.dumps([_listed(key) for key in found]))
        return
    if not found:
        console.print("no API keys: the API is open to whoever can reach it (see docs/security.md)")
        return
    table = Table("name", "key", "namespace", "scopes", "rate/s", "created", "revoked")
    for key in found:
        table.add_row(
            key.name,
            key.prefix + "…",
            key.namespace,
            ",".join(key.scopes),
            "" if key.accept_rate is None else f"{key.accept_rate:g}",
            key.created_at.strftime("%Y-%m-%d %H:%M"),
            key.revoked_at.strftime("%Y-%m-%d %H:%M") if key.revoked_at else "",
        )
    console.print(table)


@keys.command("revoke", cls=Command)
def revoke(
    names: Annotated[list[str], typer.Argument(metavar="NAME_OR_ID", help="Keys to revoke.")],
    config: ConfigOption = None,
) -> None:
    """Revoke keys: every API process refuses them within api_key_refresh_seconds (2 s)."""
    from tidings.clock import utcnow
    from tidings.store import api_keys

    async def run(db: Database) -> list[str]:
        return await api_keys.revoke(db, names, utcnow())

    revoked = in_database(config, run)
    for name in revoked:
        console.print(f"revoked {name!r}", highlight=False)
    if len(revoked) < len(set(names)):
        fail("no such key, or revoked already: some of " + ", ".join(names))
