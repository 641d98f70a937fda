"""Simulated FCM: the HTTP v1 send API and its OAuth token endpoint (``api.py``); the mirror of
``tidings.providers.fcm``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.fcm.api import FcmSimulator

__all__ = ["FcmSimulator"]
