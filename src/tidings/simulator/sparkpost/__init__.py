"""Simulated SparkPost: its Transmissions API (``api.py``) and the webhook batches it posts
(``events.py``); the mirror of ``tidings.providers.sparkpost``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.sparkpost.api import SparkPostSimulator

__all__ = ["SparkPostSimulator"]
