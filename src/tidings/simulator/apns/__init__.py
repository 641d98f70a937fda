"""Simulated APNs: the HTTP/2 push API over TLS (``api.py``); the mirror of
``tidings.providers.apns``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.apns.api import ApnsSimulator

__all__ = ["ApnsSimulator"]
