"""The SQLite database and its -wal and -shm files are readable by their owner only
(docs/operations.md): they hold addresses and webhook endpoint secrets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidings.store.engine import connect
from tidings.store.migrate import upgrade


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most systems start a service with: files are made 0644 unless asked."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mode & 0o777 for p in directory.iterdir()}


@pytest.mark.usefixtures("usual_umask")
async def test_database_wal_and_shm_are_created_0600(tmp_path: Path) -> None:
    path = tmp_path / "tidings.db"
    db = connect(f"sqlite:///{path}")
    try:
        await upgrade(db, day_partitions=False)
        files = modes(tmp_path)
    finally:
        await db.dispose()
    # WAL mode: both companions exist while a connection is open.
    assert set(files) == {"tidings.db", "tidings.db-wal", "tidings.db-shm"}
    assert files == dict.fromkeys(files, 0o600)


@pytest.mark.usefixtures("usual_umask")
async def test_an_existing_database_keeps_the_mode_its_owner_set(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    path.touch(mode=0o640)
    db = connect(f"sqlite:///{path}")
    try:
        await upgrade(db, day_partitions=False)
    finally:
        await db.dispose()
    assert path.stat().st_mode & 0o777 == 0o640
