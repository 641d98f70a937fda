"""The SMS keyword replies received (STOP, START, HELP...), newest first."""

from __future__ import annotations

from tidings.store.inbound_replies import Received, newest

__all__ = ["Received", "newest"]
