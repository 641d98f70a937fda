"""What every route reads from the application: the running service, and the request's id."""

from __future__ import annotations

from fastapi import Request

from tidings.service import Service


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def request_id_of(request: Request) -> str | None:
    """The request's id (X-Request-Id), when the request id middleware gave it one."""
    found: str | None = getattr(request.state, "request_id", None)
    return found
