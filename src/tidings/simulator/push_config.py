"""Identities of the simulated push providers (part of ``SimulatorConfig``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PushConfig(BaseModel):
    """The FCM project and APNs team the simulator issues credentials for, and which of
    the device tokens it is sent belong to what kind of device."""

    fcm_project_id: str = "tidings-sim"
    # Seconds an issued OAuth access token is valid (Google: 3600); short in tests.
    fcm_token_lifetime: int = Field(default=3600, ge=1)
    # FCM tokens of Apple devices start with this (real tokens do not tell; the simulator
    # needs to, as FCM hands a message's apns block to APNs for Apple devices only).
    fcm_apple_token_prefix: str = Field(default="apple-", min_length=1)
    apns_team_id: str = Field(default="SIMTEAM001", min_length=10, max_length=10)
    apns_key_id: str = Field(default="SIMKEY0001", min_length=10, max_length=10)
    apns_topic: str = "com.example.tidings"
    # The APNs listener with TLS (ALPN h2), besides h2c on the HTTP port; 0: any free port.
    apns_tls_port: int = Field(default=0, ge=0, le=65535)
    # Device tokens of development builds: valid at the sandbox endpoint only. Every other
    # token is a production one (Apple: a token belongs to one environment).
    apns_sandbox_tokens: list[str] = Field(default_factory=list)
