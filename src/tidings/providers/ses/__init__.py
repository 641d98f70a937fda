"""Amazon SES email (v2 SendEmail): the account (``account.py``), the adapter
(``adapter.py``, with its body in ``content.py`` and AWS Signature Version 4 in
``sigv4.py``), its error table (``errors.py``) and its notifications through SNS: the
signature (``sns_signature.py``, ``sns_fetch.py``), what each event means (``events.py``)
and the receiver (``receiver.py``). The simulator's side is ``tidings.simulator.ses``."""

from __future__ import annotations

from tidings.providers.ses.account import SesAccount
from tidings.providers.ses.adapter import SesProvider
from tidings.providers.ses.receiver import SesReceiver

__all__ = ["SesAccount", "SesProvider", "SesReceiver"]
