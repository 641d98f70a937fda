"""User and content policy (docs/architecture.md, Policy check order): what may be sent, to whom,
and when."""
