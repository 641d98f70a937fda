"""Simulated WhatsApp Cloud API: sending (``api.py``) and the signed status webhooks it posts
back; the mirror of ``tidings.providers.whatsapp``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.whatsapp.api import SimulatedWhatsApp

__all__ = ["SimulatedWhatsApp"]
