"""The provider contract, sending: every adapter of the table against the simulator.

A send is accepted; each documented answer becomes the error its table says; the rate limit
and an outage are transient; a misconfigured account is refused before anything is sent; no
answer after the request left is ambiguous, a refused connection is not. A row that leaves a
case out fails here naming it; a NotApplicable case is skipped with its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.integration.contract import cases
from tests.integration.contract.adapters import PROVIDERS, Contract, ProviderError, TransientError
from tests.integration.contract.cases import (
    INBOUND_CASES,
    OUTBOUND_CASES,
    Ambiguous,
    Answer,
    Misconfigured,
)
from tidings.providers.base import Provider
from tidings.simulator.server import Simulator

NAMES = sorted(PROVIDERS)


def case(contract: Contract, name: str) -> Any:
    return cases.case(contract.capabilities, contract.name, name)


def rows(name: str) -> Iterator[Any]:
    """(provider, item) for each item of a tuple case; the bare provider otherwise, so that
    a missing or NotApplicable case still shows up as a test."""
    for provider in NAMES:
        found = getattr(PROVIDERS[provider].capabilities, name)
        if isinstance(found, tuple):
            for item in found:
                label = item.script if isinstance(item, Answer) else item.id
                yield pytest.param(provider, item, id=f"{provider}-{label}")
        else:
            yield pytest.param(provider, None, id=provider)


@contextlib.asynccontextmanager
async def adapter(contract: Contract, sim: Simulator, **changes: Any) -> AsyncIterator[Provider]:
    provider = contract.adapter(contract.account(sim, **changes))
    try:
        yield provider
    finally:
        await provider.close()


async def raised(provider: Provider, *messages: Any) -> ProviderError:
    """Send ``messages``: all but the last succeed, the last raises; that error."""
    *before, last = messages
    for message in before:
        await provider.send(message)
    with pytest.raises(ProviderError) as caught:
        await provider.send(last)
    return caught.value


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_every_provider_fills_every_case() -> None:
    """The table's report: what each row leaves out (each such test fails on its own too)."""
    missing = [
        f"{name}.{field}"
        for name in NAMES
        for field in OUTBOUND_CASES + INBOUND_CASES
        if getattr(PROVIDERS[name].capabilities, field) is None
    ]
    assert missing == [], f"cases missing from tests/integration/contract/adapters.py: {missing}"


@pytest.mark.parametrize("provider", NAMES)
async def test_a_send_is_accepted(provider: str, sim: Simulator) -> None:
    contract = PROVIDERS[provider]
    message = contract.message(sim)
    async with adapter(contract, sim) as sending:
        result = await sending.send(message)
    assert result.provider == sending.name
    assert result.provider_msg_id
    [received] = sim.state(contract.state).received
    assert received.idempotency_key == str(message.delivery_id)


@pytest.mark.parametrize("provider", NAMES)
async def test_a_repeated_delivery_is_sent_again_or_answered_as_the_first(
    provider: str, sim: Simulator
) -> None:
    """Most providers do not dedupe by our key: one delivery sent twice is sent twice. What
    keeps tidings from doing so is its claim and dedup key; the simulator knows the repeat
    by the delivery id the adapter puts in the request. A provider that honours the key
    answers the second as the first and sends once."""
    contract = PROVIDERS[provider]
    repeat = case(contract, "repeat")
    message = contract.message(sim)
    async with adapter(contract, sim) as sending:
        first, second = await sending.send(message), await sending.send(message)
        await sending.send(contract.message(sim))
    if repeat.honoured:
        assert first.provider_msg_id == second.provider_msg_id
        summary = sim.state(contract.state).summary()
        assert (summary["received"], summary["distinct"], summary["duplicates"]) == (2, 2, 0)
        return
    if repeat.same_id:
        assert first.provider_msg_id == second.provider_msg_id == str(message.delivery_id)
    else:
        assert first.provider_msg_id != second.provider_msg_id
    summary = sim.state(contract.state).summary()
    assert (summary["received"], summary["distinct"], summary["duplicates"]) == (3, 2, 1)
    keys = [r.idempotency_key for r in sim.state(contract.state).received[:2]]
    assert keys == [str(message.delivery_id)] * 2


@pytest.mark.parametrize(("provider", "answer"), list(rows("answers")))
async def test_each_answer_is_classified_by_the_error_table(
    provider: str, answer: Answer | None, sim: Simulator
) -> None:
    contract = PROVIDERS[provider]
    case(contract, "answers")
    assert answer is not None
    state = sim.state(contract.state)
    message = contract.message(sim)
    state.script(contract.scripted(message), answer.script)
    async with adapter(contract, sim) as sending:
        answer.raised.check(await raised(sending, message))
        assert state.counts["received"] == 0
        # The next attempt goes through on the same adapter (an SMTP session reset or
        # replaced), with the same delivery id.
        await sending.send(message)
    assert [r.idempotency_key for r in state.received] == [str(message.delivery_id)]


@pytest.mark.parametrize("provider", NAMES)
async def test_the_rate_limit_is_transient_with_its_retry_after(
    provider: str, sim: Simulator
) -> None:
    contract = PROVIDERS[provider]
    expected = case(contract, "rate_limited")
    state = sim.state(contract.state)
    state.behaviour = state.behaviour.model_copy(update={"rate_limit": 1.0})
    async with adapter(contract, sim) as sending:
        expected.check(await raised(sending, contract.message(sim), contract.message(sim)))
    assert state.counts["received"] == 1


@pytest.mark.parametrize("provider", NAMES)
async def test_an_outage_is_transient(provider: str, sim: Simulator) -> None:
    contract = PROVIDERS[provider]
    expected = case(contract, "outage")
    state = sim.state(contract.state)
    state.behaviour = state.behaviour.model_copy(update={"down": True})
    async with adapter(contract, sim) as sending:
        expected.check(await raised(sending, contract.message(sim)))
    assert state.counts["received"] == 0


@pytest.mark.parametrize(("provider", "misconfigured"), list(rows("misconfigured")))
async def test_a_misconfigured_account_is_refused_and_nothing_is_sent(
    provider: str, misconfigured: Misconfigured | None, sim: Simulator
) -> None:
    contract = PROVIDERS[provider]
    case(contract, "misconfigured")
    assert misconfigured is not None
    changes = misconfigured.changes
    changes = changes(sim) if callable(changes) else changes
    async with adapter(contract, sim, **changes) as sending:
        misconfigured.raised.check(await raised(sending, contract.message(sim)))
    assert sim.state(contract.state).counts["received"] == 0
    if misconfigured.before_any_request:
        assert sim.state(contract.state).counts["requests"] == 0


@pytest.mark.parametrize("provider", NAMES)
async def test_no_answer_is_transient_and_ambiguous_once_the_request_left(
    provider: str, sim: Simulator
) -> None:
    contract = PROVIDERS[provider]
    expected: Ambiguous = case(contract, "ambiguous")
    state = sim.state(contract.state)
    state.behaviour = state.behaviour.model_copy(update={"latency_ms": 1000})
    account = contract.account(sim, timeout=0.2)
    assert account.on_ambiguous == expected.on_ambiguous
    sending = contract.adapter(account)
    try:
        error = await raised(sending, contract.message(sim))
    finally:
        await sending.close()
    assert isinstance(error, TransientError)
    if expected.marked:
        assert error.ambiguous and error.reason == "no_answer"
    else:
        assert not error.ambiguous and error.reason != "no_answer"
    if expected.says is not None:
        assert expected.says in str(error)
    await asyncio.sleep(1.0)  # the late answer's send has been recorded by now
    assert state.counts["received"] <= 1


@pytest.mark.parametrize("provider", NAMES)
async def test_a_refused_connection_is_transient_and_not_ambiguous(
    provider: str, sim: Simulator
) -> None:
    contract = PROVIDERS[provider]
    expected = case(contract, "refused")
    account, message = contract.unreachable(sim, f"http://127.0.0.1:{closed_port()}")
    sending = contract.adapter(account)
    try:
        error = await raised(sending, message)
    finally:
        await sending.close()
    expected.check(error)
    assert not error.ambiguous and error.reason != "no_answer"
