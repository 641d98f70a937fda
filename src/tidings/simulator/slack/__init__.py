"""Simulated Slack: the Web API's ``chat.postMessage`` and incoming webhooks (``api.py``);
the mirror of ``tidings.providers.slack``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.slack.api import SimulatedSlack

__all__ = ["SimulatedSlack"]
