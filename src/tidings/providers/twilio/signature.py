"""Twilio's ``X-Twilio-Signature`` (``providers/_twilio.py``, shared with the WhatsApp
sender), under the name the SMS package has always given it."""

from __future__ import annotations

from tidings.providers._twilio import (
    SETTINGS_HEADER,
    SIGNATURE_HEADER,
    algorithm_from_settings,
    body_sha256,
    compute_signature,
    verify_json_signature,
    verify_signature,
)

__all__ = [
    "SETTINGS_HEADER",
    "SIGNATURE_HEADER",
    "algorithm_from_settings",
    "body_sha256",
    "compute_signature",
    "verify_json_signature",
    "verify_signature",
]
