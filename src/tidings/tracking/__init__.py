"""Tracking: what providers report after a send (webhooks, signatures), mapped to deliveries."""
