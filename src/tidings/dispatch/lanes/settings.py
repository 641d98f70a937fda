"""The lanes' settings (``[lanes.high|normal|low]``), read by ``dispatch/lanes/direct.py``.

A module of its own so that the configuration root (``tidings.settings``) can aggregate it
without importing the lanes' machinery.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tidings.priorities import Priority


class LaneSettings(BaseModel):
    """One dispatcher lane: how many sends it runs at once and how often it polls."""

    concurrency: int = Field(ge=1, le=10_000)
    poll_interval: float = Field(default=0.5, gt=0, le=60)
    claim_batch: int = Field(default=100, ge=1, le=5_000)
    # A lane with due work that moves nothing (reads, claims, outcomes) for this long is
    # logged as stalled and restarted (dispatch/lanes/progress.py).
    stall_seconds: float = Field(default=60.0, ge=1, le=3_600)


class Lanes(BaseModel):
    """One lane per priority, each with its own claim loop and concurrency."""

    high: LaneSettings = Field(default_factory=lambda: LaneSettings(concurrency=16))
    normal: LaneSettings = Field(default_factory=lambda: LaneSettings(concurrency=16))
    low: LaneSettings = Field(default_factory=lambda: LaneSettings(concurrency=8))

    def for_priority(self, priority: Priority) -> LaneSettings:
        lane: LaneSettings = getattr(self, priority.value)
        return lane
