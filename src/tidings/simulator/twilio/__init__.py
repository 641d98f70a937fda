"""Simulated Twilio: Programmable Messaging (``api.py``) and the signed status callbacks and
replies it posts (``reports.py``); the mirror of ``tidings.providers.twilio``, importing
nothing of it."""

from __future__ import annotations

from tidings.simulator.twilio.api import SimulatedTwilio

__all__ = ["SimulatedTwilio"]
