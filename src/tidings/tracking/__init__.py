"""Delivery tracking: verifying and reading provider event webhooks."""
