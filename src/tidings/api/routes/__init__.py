"""One module per group of HTTP routes."""
