"""Rendered content reused where it cannot differ: one render for a campaign's million
deliveries whose template reads nothing that differs between them.

A template's output depends only on the variables it names (Jinja2 finds them by reading
it) and on nothing else, unless it draws random numbers (the ``random`` filter,
``lipsum``). So the content rendered for one set of values of the named variables is the
content for every delivery with the same values: the cache key is the template version and
those values (as canonical JSON; a value JSON cannot hold is not cached). A template that
names ``user``, ``unsubscribe_url`` or ``preferences_url`` gets one entry per user, and
gains nothing.

Only templates that render in the worker thread use it (loops, macros, calls: see
``render.py``): they cost a thread hop and a traced render each, about a millisecond; the
inline ones cost less than building the key. Bounded by entries and by characters kept.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from jinja2 import meta, nodes

from tidings.providers.base import Content

MAX_ENTRIES = 1024
MAX_CHARS = 16_000_000  # of rendered content kept in all, about 32 MB at worst
_RANDOM_FILTERS = frozenset({"random"})
_RANDOM_CALLS = frozenset({"lipsum"})


def variables_read(trees: Iterable[nodes.Template]) -> frozenset[str] | None:
    """The variables the parts read, or None when their output may differ between two
    renders of the same values."""
    names: set[str] = set()
    for tree in trees:
        for node in tree.find_all((nodes.Filter, nodes.Call)):
            if isinstance(node, nodes.Filter) and node.name in _RANDOM_FILTERS:
                return None
            called = node.node if isinstance(node, nodes.Call) else None
            if isinstance(called, nodes.Name) and called.name in _RANDOM_CALLS:
                return None
        names |= meta.find_undeclared_variables(tree)
    return frozenset(names)


class RenderCache:
    """Least recently used contents, keyed by ``key``."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_chars: int = MAX_CHARS) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._entries: OrderedDict[Hashable, tuple[Content, int]] = OrderedDict()
        self._chars = 0
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(template_id: Any, names: frozenset[str], variables: Mapping[str, Any]) -> str | None:
        """The key of a render of ``template_id`` with ``variables``; None: do not cache."""
        try:
            values = json.dumps(
                {name: variables.get(name) for name in names},
                sort_keys=True,
                separators=(",", ":"),
                allow_nan=False,
            )
        except (TypeError, ValueError):
            return None
        return f"{template_id}\x00{values}"

    def get(self, key: str) -> Content | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return _copy(found[0])

    def put(self, key: str, content: Content) -> None:
        size = len(content.text) + len(content.subject or "") + len(content.html or "")
        size += sum(len(str(v)) for v in content.data.values())
        if size > self.max_chars // 16:
            return  # one huge message would push out many small ones
        if key in self._entries:
            self._chars -= self._entries.pop(key)[1]
        self._entries[key] = (_copy(content), size)
        self._chars += size
        while len(self._entries) > self.max_entries or self._chars > self.max_chars:
            self._chars -= self._entries.popitem(last=False)[1][1]

    def __len__(self) -> int:
        return len(self._entries)


def _copy(content: Content) -> Content:
    """Each delivery its own Content: nothing one send does to it reaches another."""
    return Content(content.subject, content.text, content.html, dict(content.data))
