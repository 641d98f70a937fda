"""tidings: a self-hosted multi-channel notification service."""

from __future__ import annotations

__version__ = "0.1.0"
