"""Workflows: a type's steps (send, wait, unless, digest, throttle) run in order for each
notification (docs/workflows.md)."""
