"""Templates compiled and rendered in Jinja2's sandbox, with strict undefined variables.

A template cannot reach Python internals: an attribute or item whose name starts with an
underscore (``''.__class__``) is refused when the template is uploaded, and the sandbox
refuses at render time what static analysis cannot see. Text parts render without
escaping; the HTML part autoescapes every variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jinja2 import StrictUndefined, TemplateError, nodes
from jinja2 import Template as JinjaTemplate
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tidings.providers.base import Content


class TemplateRejected(ValueError):
    """A template that cannot be stored: a syntax error or an unsafe construct."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(f"{part}: {message}")
        self.part = part


class RenderError(Exception):
    """A stored template that fails for this delivery's data (missing variable, sandbox
    refusal, a limit exceeded): the delivery is poison."""


def _environment(autoescape: bool) -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        undefined=StrictUndefined, autoescape=autoescape, keep_trailing_newline=False
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
    return env


TEXT = _environment(autoescape=False)
HTML = _environment(autoescape=True)


def compile_part(part: str, source: str, *, html: bool = False) -> JinjaTemplate:
    """Compile one part (``subject``, ``text``, ``html``, ``data.<key>``) or raise
    ``TemplateRejected`` saying what is wrong and where."""
    env = HTML if html else TEXT
    try:
        tree = env.parse(source)
    except TemplateError as error:
        line = getattr(error, "lineno", None)
        where = f" (line {line})" if line else ""
        raise TemplateRejected(part, f"{error}{where}") from None
    _refuse_private_names(part, tree)
    return env.from_string(tree)


def _refuse_private_names(part: str, tree: nodes.Template) -> None:
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            name = node.attr
        else:
            assert isinstance(node, nodes.Getitem)
            name = _constant(node.arg)
        if isinstance(name, str) and name.startswith("_"):
            raise TemplateRejected(
                part, f"templates may not use names starting with '_' (found {name!r})"
            )


def _constant(node: nodes.Node) -> Any:
    return node.value if isinstance(node, nodes.Const) else None


@dataclass(frozen=True)
class CompiledTemplate:
    """One stored template version, compiled once and rendered for many deliveries."""

    id: Any
    type: str
    channel: str
    locale: str
    version: int
    subject: JinjaTemplate | None
    text: JinjaTemplate | None
    html: JinjaTemplate | None
    data: dict[str, JinjaTemplate] = field(default_factory=dict)

    def render(self, variables: dict[str, Any]) -> Content:
        try:
            return Content(
                subject=_render(self.subject, variables),
                text=_render(self.text, variables) or "",
                html=_render(self.html, variables),
                data={key: t.render(variables) for key, t in self.data.items()},
            )
        except TemplateError as error:  # StrictUndefined, SecurityError, filter errors
            raise RenderError(f"{type(error).__name__}: {error}") from None
        except (TypeError, ValueError, ArithmeticError) as error:
            raise RenderError(f"{type(error).__name__}: {error}") from None


def _render(template: JinjaTemplate | None, variables: dict[str, Any]) -> str | None:
    return None if template is None else template.render(variables)


def compile_row(row: dict[str, Any]) -> CompiledTemplate:
    """A stored template row, compiled (it was checked on upload, so this does not fail)."""
    data = row.get("data") or {}
    return CompiledTemplate(
        id=row["id"],
        type=row["type"],
        channel=row["channel"],
        locale=row["locale"],
        version=row["version"],
        subject=_optional("subject", row.get("subject")),
        text=_optional("text", row.get("text")),
        html=_optional("html", row.get("html"), html=True),
        data={key: compile_part(f"data.{key}", value) for key, value in data.items()},
    )


def _optional(part: str, source: str | None, *, html: bool = False) -> JinjaTemplate | None:
    return None if source is None else compile_part(part, source, html=html)
