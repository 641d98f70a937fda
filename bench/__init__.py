"""Benchmarks of tidings on PostgreSQL, each next to a raw-SQL baseline run in the same process.

``python -m bench`` (or ``make bench``) creates a scratch database, measures intake (single
requests and batches, over real HTTP) and dispatch (no-op provider), alternating every
tidings run with its baseline, and writes the medians and ratios to ``docs/benchmarks.md``.
"""
