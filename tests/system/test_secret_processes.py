"""Processes that start together and all find no unsubscribe secret (moved from
tests/integration/test_unsubscribe.py: it spawns processes). Each spawned process imports
only this module."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _read_secret_after(barrier: Any, secret_file: Path) -> str:
    from tidings.policy.unsubscribe import load_secret

    barrier.wait()
    return load_secret(None, secret_file)


def test_processes_starting_together_agree_on_one_secret(tmp_path: Path) -> None:
    """``tidings api --workers N`` starts N processes that may all find no secret file: each
    must end up with the one secret written, none with an error or a half-written file."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    secret_file = tmp_path / "state" / "tidings.secret"
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(8, mp_context=context) as pool:
        barrier = manager.Barrier(8)
        values = list(pool.map(_read_secret_after, [barrier] * 8, [secret_file] * 8))
    assert len(set(values)) == 1 and len(values[0]) >= 32
    assert secret_file.read_text() == values[0]
    assert [path.name for path in secret_file.parent.iterdir()] == ["tidings.secret"]
    assert secret_file.stat().st_mode & 0o777 == 0o600
