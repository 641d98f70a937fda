"""Rendered content reused only where it cannot differ (content/render_cache.py)."""

from __future__ import annotations

import uuid
from typing import Any

from tidings.content import render
from tidings.content.render import CompiledTemplate, compile_row
from tidings.content.render_cache import RenderCache
from tidings.providers.base import Content

LOOP = "{% for item in items %}{{ item }} {% endfor %}"


def template(text: str, subject: str = "Hi", version: int = 1) -> CompiledTemplate:
    row = {
        "id": uuid.uuid4(),
        "type": "weekly",
        "channel": "email",
        "locale": "en",
        "version": version,
        "subject": subject,
        "text": text,
    }
    return compile_row(row)


def variables(**data: Any) -> dict[str, Any]:
    user = data.pop("user", {})
    return {**data, "data": data, "user": user, "locale": "en", "unsubscribe_url": None}


async def counted(compiled: CompiledTemplate, values: dict[str, Any]) -> tuple[Content, int]:
    """The content, and how many renders of the cache were served from it."""
    before = render.CACHE.hits
    content = await compiled.render_async(values)
    return content, render.CACHE.hits - before


async def test_the_same_values_render_once() -> None:
    compiled = template(LOOP)
    assert not compiled.inline and compiled.reads == frozenset({"items"})
    first, hits = await counted(compiled, variables(items=[1, 2], other="a"))
    assert (first.text, hits) == ("1 2 ", 0)
    # Another delivery: what the template does not read may differ.
    second, hits = await counted(compiled, variables(items=[1, 2], other="b"))
    assert (second.text, hits) == ("1 2 ", 1)
    third, hits = await counted(compiled, variables(items=[3]))
    assert (third.text, hits) == ("3 ", 0)


async def test_what_differs_per_user_is_rendered_per_user() -> None:
    compiled = template(LOOP + "{{ user.name }}")
    ana, _ = await counted(compiled, variables(items=[1], user={"name": "Ana"}))
    bob, hits = await counted(compiled, variables(items=[1], user={"name": "Bob"}))
    assert (ana.text, bob.text, hits) == ("1 Ana", "1 Bob", 0)


async def test_a_template_drawing_random_numbers_is_never_reused() -> None:
    compiled = template(
        "{% for i in range(3) %}{{ [1, 2, 3, 4, 5, 6, 7, 8] | random }}{% endfor %}"
    )
    assert compiled.reads is None
    texts = set()
    for _ in range(20):
        content, hits = await counted(compiled, variables())
        assert hits == 0
        texts.add(content.text)
    assert len(texts) > 1
    assert template("{% for i in range(2) %}{{ lipsum(1) }}{% endfor %}").reads is None


async def test_another_version_is_another_entry() -> None:
    old, new = template(LOOP, version=1), template(LOOP + "!", version=2)
    await counted(old, variables(items=[1]))
    content, hits = await counted(new, variables(items=[1]))
    assert (content.text, hits) == ("1 !", 0)


async def test_a_send_that_changes_its_content_changes_no_other() -> None:
    compiled = template(LOOP)
    first, _ = await counted(compiled, variables(items=["x"]))
    first.text = "changed"
    first.data["key"] = "value"
    second, hits = await counted(compiled, variables(items=["x"]))
    assert (second.text, second.data, hits) == ("x ", {}, 1)


def test_the_cache_is_bounded_by_entries_and_characters() -> None:
    cache = RenderCache(max_entries=3, max_chars=1_600)
    for n in range(5):
        cache.put(f"k{n}", Content(text="t"))
    assert len(cache) == 3 and cache.get("k0") is None and cache.get("k4") is not None
    cache.put("big", Content(text="x" * 200))  # over a sixteenth of the budget: not kept
    assert cache.get("big") is None
    for n in range(20):
        cache.put(f"m{n}", Content(text="y" * 90))
    assert len(cache) <= 3 and cache.get("m19") is not None


def test_values_json_cannot_hold_are_not_cached() -> None:
    names = frozenset({"when"})
    assert RenderCache.key("t", names, {"when": object()}) is None
    assert RenderCache.key("t", names, {"when": float("nan")}) is None
    assert RenderCache.key("t", names, {"when": [1]}) != RenderCache.key(
        "t", names, {"when": "[1]"}
    )
