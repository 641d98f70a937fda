"""The FastAPI application: routes, JSON errors and the body size limit."""

from __future__ import annotations

import functools
from typing import Any

from fastapi import FastAPI

from tidings import __version__
from tidings.api import errors
from tidings.api.body_limit import BodySizeLimit
from tidings.api.routes import (
    deadletters,
    health,
    notifications,
    preferences,
    providers,
    registry,
    suppressions,
    templates,
    unsubscribe,
    webhooks,
)
from tidings.api.schemas import BatchIn
from tidings.api.text_guard import TextGuard
from tidings.intake.accept import accept
from tidings.intake.group_commit import GroupCommit
from tidings.service import Service

WEBHOOK_BODY_BYTES = 4 * 1024 * 1024


def create_app(service: Service) -> FastAPI:
    """The HTTP API over ``service``; the caller owns the service's lifecycle."""
    app = FastAPI(
        title="tidings",
        version=__version__,
        description="Multi-channel notifications: accepted means durable, sent once.",
    )
    app.state.service = service
    app.state.group_commit = GroupCommit(functools.partial(accept, service))
    errors.install(app)
    app.include_router(notifications.router)
    app.include_router(registry.router)
    app.include_router(preferences.router)
    app.include_router(suppressions.router)
    app.include_router(templates.router)
    app.include_router(providers.router)
    app.include_router(deadletters.router)
    app.include_router(unsubscribe.router)
    app.include_router(webhooks.router)
    app.include_router(health.router)
    settings = service.settings
    # Inside the size limit: it reads bounded bodies only.
    app.add_middleware(TextGuard, item_paths=frozenset({"/v1/notifications/batch"}))
    app.add_middleware(
        BodySizeLimit,
        limit=settings.max_body_bytes,
        limits_by_path={"/v1/notifications/batch": settings.max_batch_body_bytes},
        # SendGrid posts events in batches of up to about 768 KB.
        limits_by_prefix={"/v1/webhooks/": WEBHOOK_BODY_BYTES},
    )
    _document_batch_body(app)
    return app


def _document_batch_body(app: FastAPI) -> None:
    """Add BatchIn to the OpenAPI components: the batch route reads its body itself."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            body = BatchIn.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update({**body.pop("$defs", {}), "BatchIn": body})
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]
