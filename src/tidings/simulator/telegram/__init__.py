"""Simulated Telegram: the Bot API's ``sendMessage`` (``api.py``); the mirror of
``tidings.providers.telegram``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.telegram.api import SimulatedTelegram

__all__ = ["SimulatedTelegram"]
