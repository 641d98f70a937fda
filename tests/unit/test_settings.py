"""Settings: defaults, environment, TOML file, and which one wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidings.priorities import Priority
from tidings.settings import Settings


def test_defaults_are_the_embedded_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TIDINGS_DATABASE_URL", "TIDINGS_PORT", "TIDINGS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings.load()
    assert settings.database_url == "sqlite:///./tidings.db"
    assert settings.outbox_dir == Path("./outbox")
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert settings.providers == {"email": "sink", "sms": "sink", "push": "sink", "webhook": "sink"}
    assert (settings.retry.base_delay, settings.retry.max_delay, settings.retry.max_attempts) == (
        2.0,
        300.0,
        6,
    )
    assert settings.lanes.for_priority(Priority.HIGH).concurrency == 16


def test_toml_file_then_environment_then_explicit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "tidings.toml"
    config.write_text(
        'database_url = "postgresql://db/tidings"\nport = 9001\n'
        "[lanes.low]\nconcurrency = 2\n[retry]\nmax_attempts = 9\n"
    )
    monkeypatch.delenv("TIDINGS_DATABASE_URL", raising=False)
    monkeypatch.setenv("TIDINGS_PORT", "9002")
    monkeypatch.setenv("TIDINGS_LANES__HIGH__CONCURRENCY", "40")
    settings = Settings.load(config, host="0.0.0.0")
    assert settings.database_url == "postgresql://db/tidings"  # from the file
    assert settings.port == 9002  # the environment wins over the file
    assert settings.host == "0.0.0.0"  # explicit (command-line flags) win over both
    assert settings.lanes.low.concurrency == 2
    assert settings.lanes.high.concurrency == 40
    assert settings.lanes.normal.concurrency == 16  # untouched lanes keep their defaults
    assert settings.retry.max_attempts == 9


def test_config_file_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "other.toml"
    config.write_text('outbox_dir = "/srv/outbox"\n')
    monkeypatch.setenv("TIDINGS_CONFIG", str(config))
    assert Settings.load().outbox_dir == Path("/srv/outbox")


def test_a_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="configuration file not found"):
        Settings.load(tmp_path / "absent.toml")


def test_invalid_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDINGS_PORT", "not-a-port")
    with pytest.raises(ValueError, match="port"):
        Settings.load()
