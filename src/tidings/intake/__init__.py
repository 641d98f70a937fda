"""Intake: accepted requests become durable notifications and deliveries.

Accept (checks and rows), drafts (one request turned into rows) and group commit.
"""
