"""Campaigns: one type sent to an audience, expanded page by page into deliveries, spread
over a window or at each user's local time, cancellable, with a dry run
(docs/architecture.md, Campaigns)."""
