"""The HTTP API: routes, request and response schemas, JSON errors."""
