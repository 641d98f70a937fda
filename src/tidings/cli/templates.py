"""``tidings templates``: upload a folder of template files through a running API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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

templates = new_typer("Templates: versioned words per type, channel and locale.")


@templates.command("apply", cls=Command)
def templates_apply(
    folder: Annotated[
        Path,
        typer.Argument(metavar="FOLDER", help="A folder of <type>/<channel>.<locale>.toml files."),
    ],
    url: UrlOption = "http://127.0.0.1:8000",
) -> None:
    """Upload every template file; a file equal to the newest version stores nothing."""
    from tidings.content.files import TemplateFileError, read_templates

    try:
        files = read_templates(folder)
    except TemplateFileError as error:
        fail(str(error))
        return
    failed = False
    for item in files:
        target = f"{url}/v1/templates/{item.type}/{item.channel}/{item.locale}"
        response = http_request("PUT", target, json=item.parts)
        if response.status_code in (200, 201):
            version = response.json()["version"]
            change = "new version" if response.status_code == 201 else "unchanged"
            console.print(f"{item.path}: version {version} ({change})", highlight=False)
        else:
            failed = True
            console.print(f"{item.path}: {error_text(response)}", highlight=False)
    if failed:
        raise typer.Exit(1)
