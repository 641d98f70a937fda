"""User and content policy (DESIGN.md §6): what may be sent, to whom, and when."""
