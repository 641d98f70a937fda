"""What every route reads from the application: the running service."""

from __future__ import annotations

from fastapi import Request

from tidings.service import Service


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service
