"""Simulated Discord: Execute Webhook (``api.py``); the mirror of
``tidings.providers.discord``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.discord.api import SimulatedDiscord

__all__ = ["SimulatedDiscord"]
