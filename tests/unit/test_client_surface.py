"""``Client`` and ``AsyncClient`` offer the same calls with the same parameters, and the
``tidings-client`` distribution is the same version as tidings (docs/client.md)."""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

import tidings
from tidings.client import AsyncClient, Client

ROOT = Path(__file__).resolve().parents[2]


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name != "close"
    }


def test_both_clients_have_the_same_methods_and_parameters() -> None:
    sync, asynchronous = _public(Client), _public(AsyncClient)
    assert sorted(sync) == sorted(asynchronous)
    for name, signature in sync.items():
        assert list(signature.parameters.values()) == list(
            asynchronous[name].parameters.values()
        ), name
        assert signature.return_annotation == asynchronous[name].return_annotation, name
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name


def test_the_client_distribution_has_the_servers_version() -> None:
    pyproject = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text())
    assert pyproject["project"]["version"] == tidings.__version__
    assert pyproject["project"]["dependencies"] == ["httpx>=0.27"]
