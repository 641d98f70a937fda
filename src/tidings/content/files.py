"""Templates as files, so they can live in version control.

One TOML file per template: ``DIR/<type>/<channel>.<locale>.toml`` with the parts as keys::

    # templates/order.confirmed/email.pt-BR.toml
    subject = "Pedido {{ order }} confirmado"
    text = '''
    Olá {{ user.name }}, recebemos o pedido {{ order }}.
    '''
    html = "<p>Olá {{ user.name }}, recebemos o pedido <b>{{ order }}</b>.</p>"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARTS = {"subject", "text", "html", "data"}


@dataclass(frozen=True)
class TemplateFile:
    path: Path
    type: str
    channel: str
    locale: str
    parts: dict[str, Any]


class TemplateFileError(ValueError):
    pass


def read_templates(folder: Path) -> list[TemplateFile]:
    """Every ``<type>/<channel>.<locale>.toml`` under ``folder``, sorted by path."""
    if not folder.is_dir():
        raise TemplateFileError(f"{folder} is not a directory")
    found = [read_template(path) for path in sorted(folder.glob("*/*.toml"))]
    if not found:
        raise TemplateFileError(f"no <type>/<channel>.<locale>.toml files under {folder}")
    return found


def read_template(path: Path) -> TemplateFile:
    channel, dot, locale = path.stem.partition(".")
    if not dot or not locale:
        raise TemplateFileError(f"{path}: expected a name like email.en.toml")
    try:
        parts = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise TemplateFileError(f"{path}: {error}") from None
    unknown = set(parts) - PARTS
    if unknown:
        raise TemplateFileError(
            f"{path}: unknown keys {', '.join(sorted(unknown))} (expected subject, text, "
            "html, data)"
        )
    return TemplateFile(path, path.parent.name, channel, locale, parts)
