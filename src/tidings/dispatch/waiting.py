"""Moved to tidings/waiting.py; kept until dispatch/kafka_lane.py and dispatch/progress.py
move into dispatch/lanes/ (issue 25), so a fix in flight there is not disturbed."""

from __future__ import annotations

from tidings.waiting import first_of, sleep_unless

__all__ = ["first_of", "sleep_unless"]
