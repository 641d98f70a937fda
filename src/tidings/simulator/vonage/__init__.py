"""Simulated Vonage: the Messages API (``api.py``) and the signed status callbacks it posts
(``reports.py``); the mirror of ``tidings.providers.vonage``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.vonage.api import VonageSimulator

__all__ = ["VonageSimulator"]
