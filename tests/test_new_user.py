"""What a new user met on a first try (issue 24): a CLI that answers at once, a hint that
names the variable the CLI reads, an unmigrated database said in one line, an open address
refused before any migration, and a campaign's watch that shows one progress."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from tidings.api.auth import Scope
from tidings.cli import error_text

# What a command's own work needs, and `--help` must not pay for.
HEAVY = ("fastapi", "sqlalchemy", "aiokafka", "aiohttp", "httpx", "pydantic", "alembic", "uvicorn")


def test_the_cli_loads_no_heavy_module_before_a_command_needs_it() -> None:
    probe = (
        "import sys, json\n"
        "from tidings.cli import main\n"
        "sys.argv = ['tidings', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "Usage" in done.stdout
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_the_keys_help_names_every_scope() -> None:
    from tidings.keys_cli import SCOPE_NAMES

    assert set(SCOPE_NAMES) == {scope.value for scope in Scope}


@pytest.mark.parametrize("key", [None, "tdk_wrong"])
def test_a_401_tells_the_cli_user_to_set_tidings_api_key(
    key: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if key is None:
        monkeypatch.delenv("TIDINGS_API_KEY", raising=False)
    else:
        monkeypatch.setenv("TIDINGS_API_KEY", key)
    refused = {"error": {"code": "unauthorized", "message": "Authorization: Bearer <key>"}}
    text = error_text(httpx.Response(401, json=refused))
    assert "TIDINGS_API_KEY" in text and "Bearer" not in text, text
