"""Sections of docs/benchmarks.md that separate benchmarks own (``python -m bench.rate``).

Each is kept between ``<!-- section:NAME -->`` and ``<!-- /section:NAME -->``; a bench
replaces only its own section, and the main table (``python -m bench``) keeps them all.
"""

from __future__ import annotations

import re


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- section:{name} -->", f"<!-- /section:{name} -->"


def _pattern(name: str | None = None) -> re.Pattern[str]:
    label = re.escape(name) if name else r"[\w.-]+"
    return re.compile(rf"<!-- section:({label}) -->.*?<!-- /section:\1 -->\n?", re.DOTALL)


def replace(text: str, name: str, body: str) -> str:
    """``text`` with section ``name`` set to ``body`` (appended when absent)."""
    start, end = _markers(name)
    block = f"{start}\n{body.strip()}\n{end}\n"
    if _pattern(name).search(text):
        return _pattern(name).sub(lambda _match: block, text, count=1)
    return f"{text.rstrip()}\n\n{block}"


def kept(text: str) -> str:
    """Every section in ``text``, in order, to carry over into a rewritten file."""
    return "".join(match.group(0) for match in _pattern().finditer(text))
