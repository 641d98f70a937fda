"""Simulated Web Push: a push service and its browsers (``api.py``, payloads decrypted by
``crypto.py``); the mirror of ``tidings.providers.webpush``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.webpush.api import WebPushSimulator

__all__ = ["WebPushSimulator"]
