"""The FastAPI application: routes, JSON errors, the body size limit and its OpenAPI."""

from __future__ import annotations

import functools

from fastapi import FastAPI

from tidings import __version__
from tidings.api import errors, openapi
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
from tidings.intake.accept import accept
from tidings.intake.group_commit import GroupCommit
from tidings.service import Service

WEBHOOK_BODY_BYTES = 4 * 1024 * 1024
ROUTERS = (
    notifications.router,
    registry.router,
    preferences.router,
    suppressions.router,
    templates.router,
    providers.router,
    deadletters.router,
    unsubscribe.router,
    webhooks.router,
    health.router,
)


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
    openapi.allow_every_method(app, ROUTERS)
    for router in ROUTERS:
        app.include_router(router)
    settings = service.settings
    app.add_middleware(
        BodySizeLimit,
        limit=settings.max_body_bytes,
        limits_by_path={"/v1/notifications/batch": settings.max_batch_body_bytes},
        # SendGrid posts events in batches of up to about 768 KB.
        limits_by_prefix={"/v1/webhooks/": WEBHOOK_BODY_BYTES},
    )
    openapi.document(app, ROUTERS)
    return app
