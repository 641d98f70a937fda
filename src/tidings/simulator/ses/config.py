"""The identity of the simulated Amazon SES and its SNS topic (part of ``SimulatorConfig``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class SesConfig(BaseModel):
    """The AWS credentials the simulated SES accepts, and where its SNS topic posts."""

    access_key_id: str = Field(default="AKIASIMULATORSES0001", pattern=r"^[A-Z0-9]{16,128}$")
    secret_access_key: str = Field(default="simulator/ses/secret-access-key", min_length=1)
    # Temporary credentials: requests must carry this X-Amz-Security-Token (and sign it).
    session_token: str | None = None
    region: str = Field(default="us-east-1", pattern=r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
    # The account's verified identities: addresses, or domains (which cover their
    # subdomains' addresses too, as in SES). A From outside them is MessageRejected.
    verified_identities: list[str] = Field(default_factory=lambda: ["example.com"])
    # The configuration sets that exist; any other ConfigurationSetName is NotFoundException.
    configuration_sets: list[str] = Field(default_factory=lambda: ["tidings-events"])
    # The topic SES publishes bounces, complaints and deliveries to, and the HTTP(S)
    # endpoint subscribed to it (tidings' /v1/webhooks/ses/<account>). None: nothing posted.
    topic_arn: str = "arn:aws:sns:us-east-1:123456789012:tidings-ses-sim"
    sns_endpoint: str | None = None
    # SNS topics sign with SHA1withRSA (1) unless set to SHA256withRSA (2).
    sns_signature_version: Literal["1", "2"] = "1"
