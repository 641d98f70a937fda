"""Firebase Cloud Messaging (HTTP v1): the account, the adapter and its error table
(``adapter.py``) and the OAuth tokens of its service account (``google_auth.py``). The
simulator's side is ``tidings.simulator.fcm``."""

from __future__ import annotations

from tidings.providers.fcm.adapter import FcmAccount, FcmProvider

__all__ = ["FcmAccount", "FcmProvider"]
