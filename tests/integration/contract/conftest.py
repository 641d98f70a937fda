"""The simulator of the provider a contract test is parametrized with."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.contract.adapters import PROVIDERS
from tidings.simulator.server import Simulator


@pytest.fixture
async def sim(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Simulator]:
    contract = PROVIDERS[request.node.callspec.params["provider"]]
    async with Simulator(contract.config(tmp_path)) as simulator:
        yield simulator
