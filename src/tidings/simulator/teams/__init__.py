"""Simulated Teams Workflows webhooks (``api.py``); the mirror of
``tidings.providers.teams``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.teams.api import SimulatedTeams

__all__ = ["SimulatedTeams"]
