"""Simulated Amazon SES: SendEmail (``api.py``, its checks in ``auth.py`` and
``validation.py``), and the notifications it publishes (``notifications.py``) through a
simulated SNS topic (``sns.py``); ``config.py`` is its part of the simulator's settings. The
mirror of ``tidings.providers.ses``, importing nothing of it.

Nothing is imported here: the simulator's server reads ``config.py`` at import, and
``api.py`` registers itself with that server (``tidings.simulator.providers`` imports it).
"""
