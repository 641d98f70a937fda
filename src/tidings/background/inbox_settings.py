"""The in-app inbox's settings (``[inbox]``, docs/inbox.md): how long its messages are kept
(read by the retention pass here), and what browsers may do (read by the API: user tokens,
CORS, live streams)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class InboxSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Messages stored longer ago than this are deleted by the retention pass.
    retention_days: int = Field(default=90, ge=1, le=3650)
    # Origins whose pages may call the feed routes from a browser (CORS), exactly as the
    # browser sends them ("https://app.example.com"); none by default.
    allowed_origins: list[str] = Field(default_factory=list, max_length=100)
    # How long a user token (POST /v1/users/{id}/inbox-token) is valid.
    token_seconds: int = Field(default=3600, ge=60, le=7 * 86400)
    # Live streams (GET /v1/users/{id}/inbox/stream) one user, and one process, may hold.
    max_streams_per_user: int = Field(default=5, ge=1, le=1000)
    max_streams_per_process: int = Field(default=10_000, ge=1, le=1_000_000)
    # Seconds between heartbeats on an idle stream (proxies close silent connections).
    heartbeat_seconds: float = Field(default=15.0, ge=0.05, le=300)
