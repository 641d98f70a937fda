"""The reputation guard's verdict on a campaign's last sends (campaigns/reputation.py)."""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from tidings.campaigns.reputation import poisson_tail, verdict
from tidings.campaigns.settings import CampaignSettings
from tidings.store.campaign_pause import Window

SETTINGS = CampaignSettings()


class _Campaign:
    id = uuid.uuid4()


def judged(sends: int, complaints: int = 0, bounces: int = 0, **settings: Any) -> str | None:
    found = verdict(
        _Campaign(),  # type: ignore[arg-type]
        Window(sends, complaints, bounces),
        SETTINGS.model_copy(update=settings),
    )
    return None if found is None else found.reason


def test_defaults_are_the_mailbox_providers_limits() -> None:
    assert (SETTINGS.reputation_window, SETTINGS.max_complaint_rate) == (1000, 0.001)
    assert SETTINGS.max_bounce_rate == 0.05
    with pytest.raises(ValidationError):
        CampaignSettings(reputation_window=999)  # N >= 1,000: a rate over fewer is noise


def test_nothing_is_judged_before_the_window_is_full() -> None:
    assert judged(999, complaints=50, bounces=500) is None


def test_a_complaint_rate_surely_over_the_limit_pauses() -> None:
    assert judged(1000, complaints=1) is None  # 0.1% is the limit, not over it
    # 2 or 3 in 1,000: a campaign at 0.1% gets as many in 26% and 8% of windows.
    assert judged(1000, complaints=3) is None
    reason = judged(1000, complaints=4)  # 1.9%: under the 5% that 95% confidence allows
    assert reason is not None and reason.startswith("complaint rate 0.40% (4 of the last 1000")
    assert "campaigns.max_complaint_rate 0.10%" in reason


def test_without_confidence_the_bare_rate_decides() -> None:
    assert judged(1000, complaints=1, reputation_confidence=0) is None
    assert judged(1000, complaints=2, reputation_confidence=0) is not None


def test_a_hard_bounce_rate_surely_over_the_limit_pauses() -> None:
    assert judged(2000, bounces=101, reputation_window=2000) is None  # 5.05%: could be chance
    reason = judged(2000, bounces=130, reputation_window=2000)
    assert reason is not None and reason.startswith("hard-bounce rate 6.50%")
    assert judged(2000, bounces=101, reputation_window=2000, reputation_confidence=0)


def test_the_poisson_tail() -> None:
    assert poisson_tail(0, 1.0) == 1.0
    assert abs(poisson_tail(2, 1.0) - (1 - 2 / math.e)) < 1e-12
    assert abs(poisson_tail(4, 1.0) - 0.018988) < 1e-6
    assert 0.45 < poisson_tail(5000, 5000.0) < 0.51  # the normal approximation's side
