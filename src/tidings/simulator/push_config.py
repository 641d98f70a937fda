"""Identities of the simulated push providers (part of ``SimulatorConfig``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PushConfig(BaseModel):
    """The FCM project and APNs team the simulator issues credentials for."""

    fcm_project_id: str = "tidings-sim"
    # Seconds an issued OAuth access token is valid (Google: 3600); short in tests.
    fcm_token_lifetime: int = Field(default=3600, ge=1)
    apns_team_id: str = Field(default="SIMTEAM001", min_length=10, max_length=10)
    apns_key_id: str = Field(default="SIMKEY0001", min_length=10, max_length=10)
    apns_topic: str = "com.example.tidings"
