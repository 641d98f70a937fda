"""Jinja2's immutable sandbox, with every operation that can build something huge bounded.

Why: a template is code written by API users and run inside the dispatcher's process. The
sandbox keeps it away from Python internals; this module keeps it from building values that
a single C-level operation would spend seconds or gigabytes on (``9 ** 9 ** 9``,
``'x' * 10**10``, ``'{:>999999999}'.format(1)``, a list nested into itself forty times), so
that the deadline of ``tidings.content.render`` (checked between Python operations) is
enough to bound time, and no value outgrows ``MAX_CHARS``.

How, everywhere a template makes a value:
- operators ``**``, ``*``, ``%``, ``+`` (and the rest of the arithmetic) are intercepted
  (``intercepted_binops``, which also keeps Jinja2 from folding them at compile time);
  multiplicative ones are checked *before* they run, every result after;
- ``~``, list/tuple/dict literals, macro and ``{% set %}`` block output are generated as
  calls to this environment (``BoundedCodeGenerator``, ``concat``) that check their size;
- filters are wrapped: the ones whose parameters multiply (``center``, ``indent``,
  ``join``, ``replace``, ``batch``, ``slice``, ``format``, ``wordwrap``) are checked before,
  every result after; method calls on strings and numbers go through an allow list
  (``str.format`` widths, ``ljust``, ``join``, ``replace``... checked before);
- every value printed by ``{{ }}`` is measured (``finalize``) before it becomes text;
- macros nest at most ``MAX_MACRO_DEPTH`` deep: a recursive macro fails fast, with few
  objects made (a RecursionError would come a thousand Python frames later).
A value's size is the length of its text (containers walked with an early stop), so a
value within the bound is cheap to print, compare or copy.
"""

from __future__ import annotations

import functools
import re
import string
import threading
from collections.abc import Callable, Iterable
from typing import Any

from jinja2 import StrictUndefined, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context, Macro, markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace, generate_lorem_ipsum
from markupsafe import soft_str

MAX_CHARS = 1_000_000  # the longest text a value may print as, and a part may render to
MAX_INT_BITS = 16_384  # about 4,900 decimal digits
MAX_ITEMS = 100_000  # as Jinja2's MAX_RANGE
MAX_DEPTH = 100  # containers nested deeper are refused (and never printed)
MAX_MACRO_DEPTH = 100  # macros calling macros: well before Python's recursion limit


class LimitExceeded(SecurityError):
    """A template operation over a size bound (a ``TemplateError``, so: a render error)."""


class Expired(BaseException):
    """The render's deadline passed. A ``BaseException``, so that no ``except Exception``
    inside Jinja2 can swallow it."""


# Set by the render deadline of the current thread (see ``tidings.content.render``).
_state = threading.local()


def check_deadline() -> None:
    if getattr(_state, "expired", False):
        raise Expired


def set_expired(expired: bool) -> None:
    _state.expired = expired


def size(value: Any, budget: int = MAX_CHARS) -> int:
    """About how long ``str(value)`` is; ``LimitExceeded`` as soon as it passes ``budget``.
    A container met twice is measured once (a list of itself nested forty times is cheap
    to measure, not to print)."""
    measured = _size(value, budget, 0, {})
    if measured > budget:
        raise LimitExceeded(f"a value of more than {budget} characters")
    return measured


def _size(value: Any, budget: int, depth: int, seen: dict[int, int]) -> int:
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return 24
    if isinstance(value, int):
        return value.bit_length() // 3 + 2
    if isinstance(value, Namespace):
        value = value._Namespace__attrs  # its repr prints them
    if not isinstance(value, list | tuple | set | frozenset | dict):
        return 40  # ranges, loops, macros, undefined: a short repr of their own
    if id(value) in seen:
        return seen[id(value)]
    if depth >= MAX_DEPTH:
        raise LimitExceeded(f"values nested more than {MAX_DEPTH} deep")
    items = [i for pair in value.items() for i in pair] if isinstance(value, dict) else value
    total = 2
    for item in items:
        kind = type(item)  # strings and numbers inline: no call per item
        if kind is str:
            total += len(item) + 4
        elif kind is int:
            total += item.bit_length() // 3 + 4
        else:
            total += _size(item, budget - total, depth + 1, seen) + 2
        if total > budget:
            break
    seen[id(value)] = total
    return total


def checked(value: Any) -> Any:
    check_deadline()
    size(value)
    return value


def _check_int(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise LimitExceeded(f"a number of more than {MAX_INT_BITS} bits")


def _check_chars(chars: int, what: str) -> None:
    if chars > MAX_CHARS:
        raise LimitExceeded(f"{what} of more than {MAX_CHARS} characters")


def before_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse, before it runs, an operation whose result would be over a bound."""
    if operator == "**" and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
        _check_int(right * left.bit_length())
    elif operator == "*":
        if _is_int(left) and _is_int(right):
            _check_int(left.bit_length() + right.bit_length())
        elif _is_int(right) and isinstance(left, str | list | tuple):
            _check_chars(max(right, 0) * size(left), "a repeated value")
        elif _is_int(left) and isinstance(right, str | list | tuple):
            _check_chars(max(left, 0) * size(right), "a repeated value")
    elif operator == "%" and isinstance(left, str):
        _check_percent_format(left, right)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_PERCENT = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_percent_format(text: str, args: Any) -> None:
    fields = _PERCENT.findall(text)
    widths = 0
    for width, precision in fields:
        if "*" in (width, precision):
            raise LimitExceeded("'*' widths are not allowed in templates")
        widths += int(width or 0) + int(precision or 0)
    _check_chars(len(text) + widths + len(fields) * size(args), "a formatted text")


def _check_brace_format(text: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    widths, count = 0, 0
    for _, name, spec, _ in string.Formatter().parse(text):
        if name is None:
            continue
        count += 1
        if spec and "{" in spec:
            raise LimitExceeded("nested format fields are not allowed in templates")
        widths += sum(int(n) for n in re.findall(r"\d+", spec or ""))
    _check_chars(len(text) + widths + count * size((args, kwargs)), "a formatted text")


def bounded_binop(operator: str, left: Any, right: Any) -> Any:
    before_binop(operator, left, right)
    return checked(_BINOPS[operator](left, right))


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "**": lambda a, b: a**b,
}


def bounded_join(parts: Iterable[Any]) -> str:
    """``environment.concat``: the output of macros, call blocks and ``{% set %}`` blocks."""
    check_deadline()
    pieces = list(parts)
    _check_chars(sum(len(piece) for piece in pieces), "a block's output")
    return "".join(pieces)


# Methods a template may call on a string, number or container: those that cannot grow
# their input, plus the growing ones that ``_check_method`` bounds.
_SAFE_METHODS = frozenset(
    "capitalize casefold count endswith find index isalnum isalpha isascii isdecimal "
    "isdigit isidentifier islower isnumeric isprintable isspace istitle isupper lower lstrip "
    "partition removeprefix removesuffix rfind rindex rpartition rsplit rstrip split "
    "splitlines startswith strip swapcase title upper striptags unescape "
    "bit_length bit_count is_integer as_integer_ratio conjugate copy get items keys values "
    "center ljust rjust zfill expandtabs join replace format format_map".split()
)
_PLAIN_TYPES = (str, int, float, list, tuple, dict, set, frozenset)


def _check_method(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    method = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
    if not isinstance(owner, _PLAIN_TYPES):
        return
    if name not in _SAFE_METHODS:
        raise SecurityError(f"templates may not call {type(owner).__name__}.{name}")
    if name in ("format", "format_map") and isinstance(owner, str):
        _check_brace_format(owner, args, kwargs)
    elif name in ("center", "ljust", "rjust", "zfill") and args and _is_int(args[0]):
        _check_chars(args[0], "a padded text")
    elif name == "expandtabs" and isinstance(owner, str):
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        _check_chars(len(owner) * (tabsize if _is_int(tabsize) else 8), "a text")
    elif name == "join" and isinstance(owner, str) and args:
        _check_chars(len(owner) * _count(args[0]), "a joined text")  # cheap, first
        _check_chars(len(owner) * _count(args[0]) + size(args[0]), "a joined text")
    elif name == "replace" and isinstance(owner, str) and len(args) >= 2:
        _check_replace(owner, args[0], args[1])


def _listed(items: tuple[Any, ...]) -> tuple[Any, ...]:
    """``items`` with an iterator turned into a list (a string or list stays as it is)."""
    return tuple(
        item if isinstance(item, str | list | tuple | dict) else list(item) for item in items
    )


def _count(items: Any) -> int:
    try:
        return len(items)
    except TypeError:
        return MAX_CHARS + 1  # an iterator of unknown length: join a list instead


def _check_replace(text: str, old: Any, new: Any) -> None:
    if isinstance(old, str) and isinstance(new, str):
        times = text.count(old) if old else len(text) + 1
        _check_chars(len(text) + times * len(new), "a replaced text")


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    before = _FILTER_CHECKS.get(name)

    @functools.wraps(function)  # keeps Jinja2's pass_context / pass_environment mark
    def bounded(*args: Any, **kwargs: Any) -> Any:
        check_deadline()
        if name == "join":  # measured before joined: an iterator becomes a list
            first = 1 if getattr(function, "jinja_pass_arg", None) else 0
            args = (*args[:first], *_listed(args[first : first + 1]), *args[first + 1 :])
        if before is not None:
            before(_filter_args(function, args), kwargs)
        return checked(function(*args, **kwargs))

    return bounded


def _filter_args(function: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The arguments after the context or environment Jinja2 passes first."""
    return args[1:] if getattr(function, "jinja_pass_arg", None) else args


def _width(position: int, keyword: str, limit: int, what: str) -> Callable[..., None]:
    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        value = args[position] if len(args) > position else kwargs.get(keyword)
        if isinstance(value, int) and value > limit:
            raise LimitExceeded(f"{what} of more than {limit}")

    return check


def _check_indent(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    text = str(args[0]) if args else ""
    width = args[1] if len(args) > 1 else kwargs.get("width", 4)
    per_line = width if _is_int(width) else len(str(width))
    _check_chars(len(text) + (text.count("\n") + 1) * per_line, "an indented text")


def _check_join(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    separator = args[1] if len(args) > 1 else kwargs.get("d", "")
    _check_chars(len(str(separator)) * _count(args[0]), "a joined text")  # cheap, first
    _check_chars(len(str(separator)) * _count(args[0]) + size(args[0]), "a joined text")


def _check_format(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    _check_percent_format(str(args[0]), (args[1:], kwargs))


def _check_wordwrap(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    text = str(args[0]) if args else ""
    wrap = args[3] if len(args) > 3 else kwargs.get("wrapstring") or "\n"
    _check_chars(len(text) * (1 + len(str(wrap))), "a wrapped text")


def _check_replace_filter(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if len(args) >= 3:
        _check_replace(str(args[0]), str(args[1]), str(args[2]))


_FILTER_CHECKS: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], None]] = {
    "center": _width(1, "width", MAX_CHARS, "a centred text"),
    "batch": _width(1, "linecount", MAX_ITEMS, "a batch"),
    "slice": _width(1, "slices", MAX_ITEMS, "a slice"),
    "indent": _check_indent,
    "join": _check_join,
    "format": _check_format,
    "wordwrap": _check_wordwrap,
    "replace": _check_replace_filter,
}


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    if n > 100 or max > 1000:
        raise LimitExceeded("lipsum: at most 100 paragraphs of 1000 words")
    return str(generate_lorem_ipsum(n, html, min, max))


class BoundedCodeGenerator(CodeGenerator):
    """Jinja2's code generator, with ``~`` and literals made by bounded calls."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        if frame.eval_ctx.volatile:
            self.write("), context.eval_ctx.autoescape)")
        else:
            self.write(f"), {bool(frame.eval_ctx.autoescape)!r})")

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self.write("environment.checked(")
        super().visit_List(node, frame)
        self.write(")")

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        if node.ctx != "load":  # an assignment target
            super().visit_Tuple(node, frame)
            return
        self.write("environment.checked(")
        super().visit_Tuple(node, frame)
        self.write(")")

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self.write("environment.checked(")
        super().visit_Dict(node, frame)
        self.write(")")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """See the module docstring. Compiled without Jinja2's optimizer: it would run
    constant expressions (and filters on constants) at upload, unbounded."""

    code_generator_class = BoundedCodeGenerator
    intercepted_binops = frozenset(_BINOPS)
    concat = staticmethod(bounded_join)
    checked = staticmethod(checked)

    def __init__(self, autoescape: bool) -> None:
        super().__init__(
            undefined=StrictUndefined,
            autoescape=autoescape,
            keep_trailing_newline=False,
            optimized=False,
            finalize=checked,
        )
        self.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
        self.globals["lipsum"] = _lipsum
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        check_deadline()
        return bounded_binop(operator, left, right)

    def call(
        __self,  # as Jinja2 names it: the call's keywords may say "self"
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        check_deadline()
        if getattr(__obj, "__name__", "") == "join":  # measured before joined
            args = (*_listed(args[:1]), *args[1:])
        _check_method(__obj, args, kwargs)
        if not isinstance(__obj, Macro):
            return checked(super().call(__context, __obj, *args, **kwargs))
        depth = getattr(_state, "macro_depth", 0)
        if depth >= MAX_MACRO_DEPTH:
            raise LimitExceeded(f"macros nested more than {MAX_MACRO_DEPTH} deep (recursion?)")
        _state.macro_depth = depth + 1
        try:
            return checked(super().call(__context, __obj, *args, **kwargs))
        finally:
            _state.macro_depth = depth

    @staticmethod
    def bounded_concat(values: tuple[Any, ...], autoescape: bool | None) -> Any:
        """``a ~ b``: what Jinja2's ``markup_join`` / ``str_join`` make, measured first."""
        check_deadline()
        pieces = [soft_str(checked(value)) for value in values]
        _check_chars(sum(len(piece) for piece in pieces), "a joined text")
        return checked(markup_join(pieces) if autoescape else str_join(pieces))  # Markup stays
