"""The simulator is a second, independent reading of each provider's documentation: it
imports nothing of tidings but itself, so a mistake in an adapter's tables (an error code,
a header, a limit) cannot be mirrored by the simulator, and a test against it can fail."""

from __future__ import annotations

import ast
from pathlib import Path

import tidings.simulator

SIMULATOR = Path(tidings.simulator.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (deferred imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_simulator_imports_nothing_of_tidings_but_itself() -> None:
    modules = sorted(SIMULATOR.rglob("*.py"))
    assert len(modules) > 10
    foreign = {
        f"{path.relative_to(SIMULATOR)}: {module}"
        for path in modules
        for module in imported_modules(path)
        if (module == "tidings" or module.startswith("tidings."))
        and not module.startswith("tidings.simulator")
    }
    assert not foreign, sorted(foreign)
