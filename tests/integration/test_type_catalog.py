"""The one cache of notification types (store/types.py): a name it does not know costs one
single-row query, not a reload of every type, and names found missing are remembered briefly
in a bounded structure."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from tidings.dispatch.pipeline.retry import RetryPolicy
from tidings.dispatch.pipeline.types import TypeRulebook
from tidings.store.engine import Database
from tidings.store.types import NotificationType, TypeCatalog, put_type

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _kind(name: str, **changes: Any) -> NotificationType:
    values: dict[str, Any] = {
        "name": name,
        "category": "transactional",
        "priority": "normal",
        "channels": ["email"],
        "ttl_seconds": None,
        "retry": None,
        "required_channels": None,
        "default_locale": None,
        "collapse_key": None,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return NotificationType(**(values | changes))


@contextlib.contextmanager
def statements(db: Database) -> Iterator[list[str]]:
    """The SQL statements sent to the database meanwhile."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])  # (conn, cursor, statement, parameters, context, executemany)

    sa.event.listen(db.engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(db.engine.sync_engine, "before_cursor_execute", record)


def _type_reads(seen: list[str]) -> list[str]:
    return [s for s in seen if "FROM notification_type" in s]


def _full_reads(seen: list[str]) -> list[str]:
    return [s for s in _type_reads(seen) if "WHERE" not in s]


async def test_rows_are_typed_and_built_by_column_name(db: Database) -> None:
    await put_type(db, _kind("receipt", retry={"maxAttempts": 3}, default_locale="pt"))
    await put_type(db, _kind("promo", category="marketing", channels=["email", "push"]))
    found = await TypeCatalog(db).get({"receipt", "promo"})
    assert found["receipt"].retry == {"maxAttempts": 3}
    assert found["receipt"].default_locale == "pt"
    assert found["receipt"].required == frozenset({"email"})  # transactional: every channel
    assert found["promo"].required == frozenset()
    assert list(found["promo"].channels) == ["email", "push"]


async def test_an_unknown_name_costs_one_row_query_and_is_remembered(db: Database) -> None:
    await put_type(db, _kind("receipt"))
    catalog = TypeCatalog(db, max_age=60)
    await catalog.get({"receipt"})
    with statements(db) as seen:
        for _ in range(20):
            assert await catalog.get({"receipt", "made.up"}) == {
                "receipt": catalog.cached("receipt")
            }
    assert _full_reads(seen) == []  # not a reload of every type per made-up name
    assert len(_type_reads(seen)) == 1  # one single-row look-up, then the miss is remembered


async def test_made_up_names_cannot_grow_memory(db: Database) -> None:
    catalog = TypeCatalog(db, max_age=60, max_misses=50)
    await catalog.get(set())
    with statements(db) as seen:
        for number in range(200):
            assert await catalog.get({f"made.up.{number}"}) == {}
    assert _full_reads(seen) == []
    assert len(_type_reads(seen)) == 200
    assert len(catalog._misses) == 50


async def test_a_type_stored_after_a_miss_is_found(db: Database) -> None:
    catalog = TypeCatalog(db, max_age=0.2)
    assert await catalog.get({"late"}) == {}
    await put_type(db, _kind("late"))  # as another process would: this catalog is not told
    await asyncio.sleep(0.3)  # past max_age, the miss is forgotten
    assert set(await catalog.get({"late"})) == {"late"}
    assert await catalog.get({"later"}) == {}
    await put_type(db, _kind("later"))
    catalog.invalidate()  # stored through this process: found at once
    assert set(await catalog.get({"later"})) == {"later"}


async def test_the_dispatcher_reads_its_rules_from_the_catalogs_rows(db: Database) -> None:
    await put_type(db, _kind("receipt", retry={"maxAttempts": 3}, ttl_seconds=60))
    catalog = TypeCatalog(db, max_age=60)
    rulebook = TypeRulebook(catalog, RetryPolicy(max_attempts=9))
    await rulebook.refresh_if_stale()
    rules = rulebook.rules("receipt")
    assert (rules.retry.max_attempts, rules.ttl_seconds) == (3, 60)
    assert rules.required_channels == frozenset({"email"})
    assert rulebook.rules("made.up").retry.max_attempts == 9  # unknown: the defaults
    await put_type(db, _kind("receipt", retry={"maxAttempts": 5}, collapse_key="orders"))
    catalog.invalidate()
    await rulebook.refresh_if_stale()
    rules = rulebook.rules("receipt")  # the new row's rules, not those derived before
    assert (rules.retry.max_attempts, rules.ttl_seconds, rules.collapse_key) == (5, None, "orders")
