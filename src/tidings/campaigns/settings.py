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
