"""Templates compiled and rendered in Jinja2's sandbox, with strict undefined variables.

A template cannot reach Python internals: an attribute or item whose name starts with an
underscore (``''.__class__``) is refused when the template is uploaded, and the sandbox
refuses at render time what static analysis cannot see. Text parts render without
escaping; the HTML part autoescapes every variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jinja2 import StrictUndefined, TemplateError, UndefinedError, nodes
from jinja2 import Template as JinjaTemplate
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import escape

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


def compile_part(part: str, source: str, *, html: bool = False) -> Part:
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
    return Part(env.from_string(tree), _plain_pieces(tree), html)


class Part:
    """One compiled part. Most parts are text with plain ``{{ name }}`` substitutions; those
    render by a direct lookup that gives what Jinja2 gives (the same text, the same
    escaping, the same error for an undefined name) at a fraction of the cost of building a
    Jinja2 context. Everything else renders through Jinja2."""

    __slots__ = ("html", "pieces", "template")

    def __init__(
        self, template: JinjaTemplate, pieces: list[tuple[str, bool]] | None, html: bool
    ) -> None:
        self.template = template
        self.pieces = pieces  # (literal text, False) or (variable name, True)
        self.html = html

    def render(self, scope: dict[str, Any]) -> str:
        """``scope`` must hold the environment's globals too (see ``CompiledTemplate``)."""
        if self.pieces is None:
            context = self.template.new_context(scope, shared=True)  # documented API
            return "".join(self.template.root_render_func(context))
        out = []
        for text, is_name in self.pieces:
            if not is_name:
                out.append(text)
                continue
            try:
                value = scope[text]
            except KeyError:
                raise UndefinedError(f"{text!r} is undefined") from None
            out.append(escape(value) if self.html else str(value))
        return "".join(out)


def _plain_pieces(tree: nodes.Template) -> list[tuple[str, bool]] | None:
    """The pieces of a template that is only text and ``{{ name }}``, else None."""
    pieces: list[tuple[str, bool]] = []
    for statement in tree.body:
        if not isinstance(statement, nodes.Output):
            return None
        for node in statement.nodes:
            if isinstance(node, nodes.TemplateData):
                pieces.append((node.data, False))
            elif isinstance(node, nodes.Name) and node.ctx == "load":
                pieces.append((node.name, True))
            else:
                return None
    return pieces


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
    subject: Part | None
    text: Part | None
    html: Part | None
    data: dict[str, Part] = field(default_factory=dict)

    def render(self, variables: dict[str, Any]) -> Content:
        # The environment's globals (range, dict, ...) merged once for every part.
        scope = {**TEXT.globals, **variables}
        try:
            return Content(
                subject=_render(self.subject, scope),
                text=_render(self.text, scope) or "",
                html=_render(self.html, scope),
                data={key: part.render(scope) for key, part in self.data.items()},
            )
        except TemplateError as error:  # StrictUndefined, SecurityError, filter errors
            raise RenderError(f"{type(error).__name__}: {error}") from None
        except (TypeError, ValueError, ArithmeticError) as error:
            raise RenderError(f"{type(error).__name__}: {error}") from None


def _render(part: Part | None, scope: dict[str, Any]) -> str | None:
    return None if part is None else part.render(scope)


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


def _optional(part: str, source: str | None, *, html: bool = False) -> Part | None:
    return None if source is None else compile_part(part, source, html=html)
