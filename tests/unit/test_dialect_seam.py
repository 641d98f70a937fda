"""The dialect seam (docs/architecture.md, The dialect seam): one Dialect per database,
chosen when the engine is made, and nothing outside store/dialects/ asks which it is."""

from __future__ import annotations

import ast
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

import tidings
from tidings.states import Status
from tidings.store import outcomes
from tidings.store.dialects import Variants
from tidings.store.engine import connect


async def test_connect_chooses_the_dialect_once(tmp_path: Path) -> None:
    lite = connect(f"sqlite:///{tmp_path / 'x.db'}")
    pg = connect("postgresql://127.0.0.1:5432/none")  # engines connect lazily
    try:
        assert (lite.dialect.name, lite.dialect.partitions, lite.dialect.server) == (
            "sqlite",
            False,
            False,
        )
        assert (pg.dialect.name, pg.dialect.partitions, pg.dialect.notifies) == (
            "postgresql",
            True,
            True,
        )
        pair = Variants(postgres="pg", sqlite="lite")
        assert (pair.of(pg), pair.of(lite)) == ("pg", "lite")
        with pytest.raises(RuntimeError, match="PostgreSQL only"):
            async with lite.asyncpg():
                pass
    finally:
        await lite.dispose()
        await pg.dispose()


def test_an_outcome_has_one_parameter_order_on_every_table() -> None:
    """asyncpg runs the statement SQLAlchemy renders: the parent bounded by days and a day's
    partition take the same positional arguments, ``_pg_row``'s."""
    near_noon = uuid.UUID(int=(20_000 * 86_400_000 + 43_200_000) << 80)  # 2024-10-04
    parent = outcomes._pg_statement(near_noon, partitioned=False)
    day = outcomes._pg_statement(near_noon, partitioned=True)
    assert "UPDATE delivery SET" in parent and "notification_id >=" in parent
    assert "UPDATE delivery_p20241004 SET" in day
    outcome = outcomes.Outcome(
        delivery_id=near_noon, claimed_attempts=1, status=Status.SENT, attempts=1
    )
    args = outcomes._pg_row(outcome, datetime.now(UTC))
    for text in (parent, day):
        numbers = {int(n) for n in re.findall(r"\$(\d+)", text)}
        assert numbers == set(range(1, len(args) + 1))
        assert "'SENDING'" in text and "lease_until=NULL" in text


SRC = Path(tidings.__file__).parent
SEAM = SRC / "store" / "dialects"


def test_no_module_outside_the_seam_asks_which_database() -> None:
    """Only the seam (store/dialects/) knows which database it is: nothing asks
    ``is_postgres`` (issue 25)."""
    askers = []
    for path in SRC.rglob("*.py"):
        if SEAM in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "is_postgres":
                askers.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert askers == []
