"""Templates compiled and rendered in a bounded Jinja2 sandbox, with strict undefined variables.

A template cannot reach Python internals: an attribute or item whose name starts with an
underscore (``''.__class__``, ``attr('__class__')``) is refused when the template is
uploaded, and the sandbox refuses at render time what static analysis cannot see. Text
parts render without escaping; the HTML part autoescapes every variable.

No template can freeze or crash the process (API and dispatcher share one event loop):
- upload refuses what can be judged by reading it (``tidings.content.static``: constant
  power towers, huge constant ranges, ``_`` names), nesting so deep the parser recurses out
  and parts of more than ``MAX_NODES`` nodes (slow to compile); it compiles off the event
  loop, without Jinja2's constant folding (which would run ``9 ** 9 ** 9`` at once);
- at render time every operation that can build a huge value is bounded before it runs
  (``tidings.content.sandbox``), the output is streamed and cut past ``MAX_CHARS``, and a
  deadline of ``RENDER_SECONDS`` is checked as the render proceeds: a per-thread trace
  function raises between two lines of the template's code. Since no single operation is
  huge, the time between two checks is short;
- three speeds: plain ``{{ name }}`` parts (``Part.pieces``, the dispatch hot path) and
  small loop-free templates (``Part.inline``: names, attributes, conditions and a few linear
  filters; their cost is that of the data) render inline, on the event loop. Anything else
  (loops, macros, calls, arithmetic) renders in a worker thread, under the deadline; the
  trace function also sleeps a millisecond in every two, so that the event loop gets the
  GIL at once instead of after Python's 5 ms switch interval (once per system call);
- whatever a render raises (a bound, the deadline, ``RecursionError`` from a recursive
  macro, ``MemoryError``, a type error) is a ``RenderError``: the delivery fails as poison.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import jinja2
import markupsafe
from jinja2 import Template as JinjaTemplate
from jinja2 import TemplateError, UndefinedError, nodes
from markupsafe import escape

from tidings.content.render_cache import RenderCache, variables_read
from tidings.content.sandbox import (
    MAX_CHARS,
    BoundedEnvironment,
    Expired,
    LimitExceeded,
    set_expired,
)
from tidings.content.static import StaticProblem, check_static
from tidings.metrics import RENDER_CACHE
from tidings.providers.base import Content

MAX_NODES = 2000  # per part; compiling 2,000 takes about 30 ms (and as much GIL)
RENDER_SECONDS = 0.5  # a real template takes well under a millisecond
# One thread: each more is one more holder of the GIL the event loop waits for (measured:
# /healthz's worst latency doubles with two). Non-inline renders queue behind a hostile one
# for at most RENDER_SECONDS each.
RENDER_THREADS = 1
YIELD_EVERY = 0.001  # a long render hands the GIL to the event loop this often...
YIELD_FOR = 0.002  # ...for this long
_TEMPLATE_FILE = "<template>"  # the file name Jinja2 gives code compiled from a string
# Where the deadline may raise: code a render runs. Not in code the interpreter runs in the
# middle of it (a garbage collector's weakref callback, a finalizer), where an exception is
# lost as "ignored" and the render goes on.
_RENDER_CODE = tuple(
    os.path.dirname(path) + os.sep for path in (jinja2.__file__, markupsafe.__file__, __file__)
)


def _in_render_code(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return name == _TEMPLATE_FILE or name.startswith(_RENDER_CODE)


class TemplateRejected(ValueError):
    """A template that cannot be stored: a syntax error or an unsafe construct."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(f"{part}: {message}")
        self.part = part


class RenderError(Exception):
    """A stored template that fails for this delivery's data (missing variable, sandbox
    refusal, a limit exceeded): the delivery is poison."""


TEXT = BoundedEnvironment(autoescape=False)
HTML = BoundedEnvironment(autoescape=True)


def compile_part(part: str, source: str, *, html: bool = False) -> Part:
    """Compile one part (``subject``, ``text``, ``html``, ``data.<key>``) or raise
    ``TemplateRejected`` saying what is wrong and where."""
    env = HTML if html else TEXT
    try:
        tree = env.parse(source)
        _check_node_count(tree)
        check_static(tree)
        template = env.from_string(tree)
    except TemplateError as error:
        line = getattr(error, "lineno", None)
        where = f" (line {line})" if line else ""
        raise TemplateRejected(part, f"{error}{where}") from None
    except StaticProblem as problem:
        raise TemplateRejected(part, str(problem)) from None
    except RecursionError:
        raise TemplateRejected(part, "expressions nested too deeply") from None
    pieces = _plain_pieces(tree)
    inline = pieces is not None or _inline(tree)
    return Part(template, pieces, html, inline=inline, reads=variables_read([tree]))


def _check_node_count(tree: nodes.Template) -> None:
    """Compiling takes time in proportion (Python's ``compile`` holds the GIL throughout)."""
    for count, _ in enumerate(tree.find_all(nodes.Node), start=1):
        if count > MAX_NODES:
            raise StaticProblem(
                f"more than {MAX_NODES} tags, expressions and texts; split the template"
            )


class Part:
    """One compiled part. Most parts are text with plain ``{{ name }}`` substitutions; those
    render by a direct lookup that gives what Jinja2 gives (the same text, the same
    escaping, the same error for an undefined name) at a fraction of the cost of building a
    Jinja2 context. Everything else renders through Jinja2, its output cut at ``MAX_CHARS``."""

    __slots__ = ("html", "inline", "pieces", "reads", "template")

    def __init__(
        self,
        template: JinjaTemplate,
        pieces: list[tuple[str, bool]] | None,
        html: bool,
        *,
        inline: bool = False,
        reads: frozenset[str] | None = None,
    ) -> None:
        self.template = template
        self.pieces = pieces  # (literal text, False) or (variable name, True)
        self.html = html
        self.inline = inline  # cheap enough to render on the event loop
        # The variables its output depends on; None: it may differ for the same values.
        self.reads = reads

    def render(self, scope: dict[str, Any]) -> str:
        """``scope`` must hold the environment's globals too (see ``CompiledTemplate``)."""
        if self.pieces is None:
            context = self.template.new_context(scope, shared=True)  # documented API
            return _bounded_output(self.template.root_render_func(context))
        out = []
        for text, is_name in self.pieces:
            if not is_name:
                out.append(text)
                continue
            try:
                value = scope[text]
            except KeyError:
                # The environment's globals, as Jinja2 would (``render`` may not merge them).
                if text not in TEXT.globals:
                    raise UndefinedError(f"{text!r} is undefined") from None
                value = TEXT.globals[text]
            out.append(escape(value) if self.html else str(value))
        return "".join(out)


def _bounded_output(chunks: Iterator[str]) -> str:
    out: list[str] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > MAX_CHARS:
            raise LimitExceeded(f"the output is longer than {MAX_CHARS} characters")
        out.append(chunk)
    return "".join(out)


class _RejectedPart(Part):
    """A stored part that today's upload check refuses (stored before the check existed):
    it fails every render instead of breaking the catalog."""

    def __init__(self, reason: str) -> None:
        super().__init__(TEXT.from_string(""), None, False, inline=True)
        self.reason = reason

    __slots__ = ("reason",)

    def render(self, scope: dict[str, Any]) -> str:
        raise LimitExceeded(f"template refused: {self.reason}")


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


# Loop-free templates of these nodes and filters cost about what their data costs to print.
_INLINE_NODES = (
    nodes.Output,
    nodes.TemplateData,
    nodes.Name,
    nodes.Const,
    nodes.Getattr,
    nodes.Getitem,
    nodes.If,
    nodes.CondExpr,
    nodes.Compare,
    nodes.Operand,
    nodes.And,
    nodes.Or,
    nodes.Not,
    nodes.Test,
    nodes.Filter,
)
_INLINE_FILTERS = frozenset(
    "default d escape e safe upper lower title capitalize trim string length count tojson".split()
)
_INLINE_MAX_NODES = 60


def _inline(tree: nodes.Template) -> bool:
    count = 0
    for node in tree.find_all(nodes.Node):
        count += 1
        if count > _INLINE_MAX_NODES or not isinstance(node, _INLINE_NODES):
            return False
        if isinstance(node, nodes.Filter) and node.name not in _INLINE_FILTERS:
            return False
    return True


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

    @functools.cached_property
    def inline(self) -> bool:
        """Every part cheap enough to render on the event loop."""
        parts = [self.subject, self.text, self.html, *self.data.values()]
        return all(part.inline for part in parts if part is not None)

    @functools.cached_property
    def plain(self) -> bool:
        """Every part is text and ``{{ name }}`` only (``Part.pieces``)."""
        parts = [self.subject, self.text, self.html, *self.data.values()]
        return all(part.pieces is not None for part in parts if part is not None)

    @functools.cached_property
    def reads(self) -> frozenset[str] | None:
        """The variables its content depends on; None: it may differ for the same values."""
        names: set[str] = set()
        for part in (self.subject, self.text, self.html, *self.data.values()):
            if part is not None:
                if part.reads is None:
                    return None
                names |= part.reads
        return frozenset(names)

    async def render_async(self, variables: dict[str, Any]) -> Content:
        """The content; off the event loop unless every part is cheap (``inline``), and
        then reused for the same values of what it reads (``render_cache.py``)."""
        if self.inline:
            return self.render(variables)
        reads = self.reads
        key = None if reads is None else CACHE.key((self.id, self.version), reads, variables)
        if key is not None and (content := CACHE.get(key)) is not None:
            RENDER_CACHE.labels("hit").inc()
            return content
        loop = asyncio.get_running_loop()
        content = await loop.run_in_executor(_workers(), self.render, variables)
        if key is not None:
            RENDER_CACHE.labels("miss").inc()
            CACHE.put(key, content)
        return content

    def render(self, variables: dict[str, Any]) -> Content:
        """The content, or ``RenderError`` for whatever went wrong (see the module
        docstring); a part that is not ``inline`` renders under the deadline."""
        # The environment's globals (range, dict, ...) merged once for every part; plain
        # ``{{ name }}`` parts look them up themselves, and skip the copy.
        scope = variables if self.plain else {**TEXT.globals, **variables}
        try:
            if self.inline:
                return self._render(scope)
            with _deadline(RENDER_SECONDS):
                return self._render(scope)
        except Expired:
            raise RenderError(f"rendering took longer than {RENDER_SECONDS} s") from None
        except RecursionError:
            raise RenderError("RecursionError: macros or values nested too deeply") from None
        except MemoryError:
            raise RenderError("MemoryError: the template needs too much memory") from None
        except TemplateError as error:  # StrictUndefined, SecurityError, bounds, filters
            raise RenderError(f"{type(error).__name__}: {error}") from None
        except Exception as error:  # the template's own doing: a type error, 1/0, ...
            raise RenderError(f"{type(error).__name__}: {error}") from None

    def _render(self, scope: dict[str, Any]) -> Content:
        return Content(
            subject=_render(self.subject, scope),
            text=_render(self.text, scope) or "",
            html=_render(self.html, scope),
            data={key: part.render(scope) for key, part in self.data.items()},
        )


def _render(part: Part | None, scope: dict[str, Any]) -> str | None:
    return None if part is None else part.render(scope)


_pool: ThreadPoolExecutor | None = None
# Contents of worker-thread templates, per process (render_cache.py).
CACHE = RenderCache()


def _workers() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(RENDER_THREADS, thread_name_prefix="tidings-render")
    return _pool


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise ``Expired`` in this thread's template code once ``seconds`` have passed: a
    trace function sees each call, and each line of compiled template code. Every
    ``YIELD_EVERY`` seconds it also sleeps ``YIELD_FOR``, handing the GIL to the event loop
    (which would otherwise wait up to Python's 5 ms switch interval for each of the few
    system calls that answering a request takes)."""
    at = time.monotonic() + seconds
    next_yield = time.monotonic() + YIELD_EVERY

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal next_yield
        now = time.monotonic()
        if now > next_yield:
            time.sleep(YIELD_FOR)
            next_yield = time.monotonic() + YIELD_EVERY
        if now > at:
            set_expired(True)  # the bounded operations raise it too from now on
            if _in_render_code(frame):
                raise Expired
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        on_line(frame, event, arg)
        return on_line if frame.f_code.co_filename == _TEMPLATE_FILE else None

    previous = sys.gettrace()
    set_expired(False)
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)
        set_expired(False)


def compile_row(row: dict[str, Any]) -> CompiledTemplate:
    """A stored template row, compiled. A part refused by today's checks fails at render
    time (``RenderError``) rather than here, where it would break the whole catalog."""
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
        data={key: _stored(f"data.{key}", value) for key, value in data.items()},
    )


def _optional(part: str, source: str | None, *, html: bool = False) -> Part | None:
    return None if source is None else _stored(part, source, html=html)


def _stored(part: str, source: str, *, html: bool = False) -> Part:
    try:
        return compile_part(part, source, html=html)
    except TemplateRejected as rejected:
        return _RejectedPart(str(rejected))
