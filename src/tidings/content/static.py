"""What an upload check can refuse by reading a template: names starting with ``_`` (also
as ``attr('__class__')`` or a constant expression that makes one), and constant expressions
over a bound of ``tidings.content.sandbox`` (``9 ** (9 ** 8)``, ``'x' * 10**9``,
``range(10**9)``). Constant expressions are evaluated bottom up with the sandbox's bounded
operators, so judging one never runs an unbounded operation. What depends on the data is
left to the bounds at render time.
"""

from __future__ import annotations

from typing import Any

from jinja2 import nodes
from jinja2.sandbox import MAX_RANGE

from tidings.content.sandbox import LimitExceeded, bounded_binop, size

_UNKNOWN = object()

# Filters that look an attribute up by a name given as an argument: (position, keyword).
_ATTRIBUTE_FILTERS = {
    "attr": (0, None),
    "selectattr": (0, None),
    "rejectattr": (0, None),
    "groupby": (0, "attribute"),
    "sum": (0, "attribute"),
    "sort": (2, "attribute"),
    "unique": (1, "attribute"),
    "min": (1, "attribute"),
    "max": (1, "attribute"),
    "map": (None, "attribute"),
    "join": (1, "attribute"),
}
_BINOP = {
    nodes.Add: "+",
    nodes.Sub: "-",
    nodes.Mul: "*",
    nodes.Div: "/",
    nodes.FloorDiv: "//",
    nodes.Mod: "%",
    nodes.Pow: "**",
}


class StaticProblem(ValueError):
    """Something the template would always do that it may not."""


def check_static(tree: nodes.Template) -> None:
    """Raise ``StaticProblem`` for what is refused whatever the data."""
    values: dict[int, Any] = {}
    _evaluate(tree, values)
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter, nodes.Call)):
        for name in _looked_up_names(node, values):
            if isinstance(name, str) and any(p.startswith("_") for p in name.split(".")):
                raise StaticProblem(f"templates may not use names starting with '_' ({name!r})")


def _evaluate(node: nodes.Node, values: dict[int, Any]) -> Any:
    """The constant value of ``node``, or ``_UNKNOWN``; every constant subexpression's value
    is kept in ``values`` by node id."""
    children = [_evaluate(child, values) for child in node.iter_child_nodes()]
    value = _value(node, children)
    if value is not _UNKNOWN:
        values[id(node)] = value
    return value


def _value(node: nodes.Node, children: list[Any]) -> Any:
    if isinstance(node, nodes.Const):
        return node.value
    if _is_range_call(node):
        _check_range(children[1:])
        return _UNKNOWN
    if any(child is _UNKNOWN for child in children):
        return _UNKNOWN
    try:
        return _combine(node, children)
    except LimitExceeded as error:
        raise StaticProblem(f"a constant expression too large to render: {error}") from None
    except (ArithmeticError, TypeError, ValueError):
        return _UNKNOWN  # fails for every delivery, but is not dangerous: told at preview


def _combine(node: nodes.Node, children: list[Any]) -> Any:
    if isinstance(node, nodes.BinExpr) and type(node) in _BINOP:
        return bounded_binop(_BINOP[type(node)], children[0], children[1])
    if isinstance(node, nodes.Neg):
        return -children[0]
    if isinstance(node, nodes.Concat):
        joined = "".join(str(child) for child in children)
        size(joined)
        return joined
    if isinstance(node, nodes.Tuple | nodes.List):
        return tuple(children)
    return _UNKNOWN


def _check_range(arguments: list[Any]) -> None:
    if not all(type(argument) is int for argument in arguments) or not 1 <= len(arguments) <= 3:
        return
    try:
        length = len(range(*arguments))
    except ValueError:
        return  # range(1, 2, 0): fails at render time
    except OverflowError:
        length = MAX_RANGE + 1
    if length > MAX_RANGE:
        raise StaticProblem(f"a range of more than {MAX_RANGE} items")


def _is_range_call(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Name)
        and node.node.name == "range"
        and not node.kwargs
        and node.dyn_args is None
    )


def _looked_up_names(node: nodes.Node, values: dict[int, Any]) -> list[Any]:
    if isinstance(node, nodes.Getattr):
        return [node.attr]
    if isinstance(node, nodes.Getitem):
        return [values.get(id(node.arg))]
    if isinstance(node, nodes.Filter) and node.name in _ATTRIBUTE_FILTERS:
        position, keyword = _ATTRIBUTE_FILTERS[node.name]
        found = [values.get(id(k.value)) for k in node.kwargs if k.key == keyword]
        if node.name == "map" and node.args and values.get(id(node.args[0])) == "attr":
            position = 1
        if position is not None and len(node.args) > position:
            found.append(values.get(id(node.args[position])))
        return found
    return []
