"""The ``[campaigns]`` settings section, beside the code that reads it."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CampaignSettings(BaseModel):
    # Users per page of an expansion: each page is one transaction (on SQLite it holds the
    # one write lock meanwhile, so keep it smaller there).
    page_size: int = Field(default=10_000, ge=1, le=10_000)
    # How long an expander may hold a campaign without storing a page; a killed process's
    # campaign is taken over by another after this.
    lease_seconds: float = Field(default=30.0, gt=0)
    # How often a dispatcher looks for due campaigns and for finished ones.
    poll_interval: float = Field(default=1.0, gt=0)
    # Work due at one instant (a campaign without spreadOver, scheduled sends of LOW and
    # NORMAL priority) is spread over this many seconds after it, not claimed as one wall.
    due_spread_seconds: float = Field(default=60.0, ge=0, le=3600)
    # How long a cancel waits for the deliveries being sent at that moment to finish.
    cancel_wait_seconds: float = Field(default=30.0, ge=0, le=600)
    # The reputation guard (campaigns/reputation.py): a running campaign pauses itself when,
    # over its last reputation_window sends, the share that complained (spam reports) exceeds
    # max_complaint_rate or the share that bounced hard exceeds max_bounce_rate. Gmail and
    # Yahoo refuse bulk senders at 0.3% complaints and want them under 0.1%.
    reputation_window: int = Field(default=1000, ge=1000, le=1_000_000)
    max_complaint_rate: float = Field(default=0.001, ge=0, le=1)
    max_bounce_rate: float = Field(default=0.05, ge=0, le=1)
    # How sure the guard must be that a rate exceeds its limit: the count seen over the
    # window must be one a campaign at the limit would reach by chance less often than
    # 1 - confidence (a Poisson tail). 0: the bare rate over the window decides, so two
    # complaints close together pause a campaign whose true rate is half the limit.
    reputation_confidence: float = Field(default=0.95, ge=0, lt=1)
    # How often the guard looks at running campaigns (each look reads their last sends).
    reputation_interval: float = Field(default=5.0, gt=0, le=3600)
