"""The FastAPI application: routes, JSON errors, the body size limit and its OpenAPI."""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp

from tidings import __version__
from tidings.api import errors, openapi
from tidings.api.auth import PUBLIC, Keyring
from tidings.api.body_limit import BodySizeLimit
from tidings.api.inbox_cors import InboxCors
from tidings.api.key_first import KeyFirst
from tidings.api.request_id import RequestId
from tidings.api.routes import (
    callbacks,
    campaigns,
    dashboard,
    deadletters,
    engagement,
    events,
    health,
    inbox,
    inbox_script,
    inbox_stream,
    metrics,
    notifications,
    preference_center,
    preferences,
    providers,
    registry,
    replies,
    reports,
    suppressions,
    templates,
    topics,
    unsubscribe,
    users,
    webhook_endpoints,
    workflows,
)
from tidings.api.text_guard import TextGuard
from tidings.group_commit import GroupCommit
from tidings.intake.accept import accept
from tidings.service import Service

WEBHOOK_BODY_BYTES = 4 * 1024 * 1024
# 10,000 user ids of up to 255 characters, JSON-quoted: about 2.6 MB (topics, campaigns).
TOPIC_BODY_BYTES = 3 * 1024 * 1024
ROUTERS = (
    # Before notifications: POST /v1/notifications/cancel is no notification id.
    workflows.router,
    notifications.router,
    registry.router,
    users.router,
    preferences.router,
    inbox.router,
    inbox_stream.router,
    inbox_script.router,
    suppressions.router,
    replies.router,
    topics.router,
    campaigns.router,
    reports.router,
    templates.router,
    providers.router,
    deadletters.router,
    events.router,
    webhook_endpoints.router,
    unsubscribe.router,
    preference_center.router,
    engagement.router,
    callbacks.router,
    health.router,
    metrics.router,
    dashboard.router,
)


class _App(FastAPI):
    """Request ids outermost, outside even Starlette's error middleware: a 500 answer and
    its log line carry the request's id too."""

    def build_middleware_stack(self) -> ASGIApp:
        return RequestId(super().build_middleware_stack())


def create_app(service: Service) -> FastAPI:
    """The HTTP API over ``service``; the caller owns the service's lifecycle."""
    app = _App(
        title="tidings",
        version=__version__,
        description="Multi-channel notifications: accepted means durable, sent once.",
        docs_url=None,
        redoc_url=None,
    )
    _serve_docs_offline(app)
    app.state.service = service
    app.state.keyring = Keyring(
        service.db, service.settings.namespace, service.settings.api_key_refresh_seconds
    )
    app.state.group_commit = GroupCommit(functools.partial(accept, service))
    errors.install(app)
    openapi.allow_every_method(app, ROUTERS)
    for router in ROUTERS:
        app.include_router(router)
    settings = service.settings
    # Inside the size limit: it reads bounded bodies only.
    app.add_middleware(TextGuard, item_paths=frozenset({"/v1/notifications/batch"}))
    app.add_middleware(
        BodySizeLimit,
        limit=settings.max_body_bytes,
        limits_by_path={
            "/v1/notifications/batch": settings.max_batch_body_bytes,
            "/v1/users/batch": settings.max_batch_body_bytes,
        },
        # SendGrid posts events in batches of up to about 768 KB.
        limits_by_prefix={
            "/v1/webhooks/": WEBHOOK_BODY_BYTES,
            "/v1/topics/": TOPIC_BODY_BYTES,
            "/v1/campaigns": TOPIC_BODY_BYTES,  # 10,000 inline user ids, as a topic takes
        },
    )
    # Outermost: a request without a valid key learns nothing of its body (not even 413).
    app.add_middleware(KeyFirst)
    # Outside it: a browser's preflight carries no credentials (docs/inbox.md, CORS).
    app.add_middleware(InboxCors, origins=list(settings.inbox.allowed_origins))
    openapi.document(app, ROUTERS)
    return app


DOCS_ASSETS = "/docs/assets"
# Swagger UI 5 (it reads OpenAPI 3.1, as FastAPI writes it; version 4 could not), as the
# fastapi-offline package ships it.
SWAGGER_UI_FILES = Path(fastapi_offline.__file__).parent / "static"


def _serve_docs_offline(app: FastAPI) -> None:
    """/docs with Swagger UI's files served from the installed package, not a CDN, so the
    page works without internet access. (/redoc is off: one documentation page.)"""
    app.mount(DOCS_ASSETS, StaticFiles(directory=SWAGGER_UI_FILES), "docs")

    @app.get("/docs", include_in_schema=False, dependencies=PUBLIC)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )
