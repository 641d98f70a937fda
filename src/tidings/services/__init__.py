"""The application layer: what the API's routes ask of tidings, one module per domain.

Routes parse a request, call a service and shape its answer; services read and write
through the store and return its typed rows (frozen dataclasses, never ``dict[str, Any]``).
No module of ``api/`` imports ``store`` (docs/architecture.md, Import layers). The flows
with logic of their own keep their packages: ``intake/`` (accepting notifications) and
``campaigns/``.
"""
