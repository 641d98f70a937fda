"""The OpenAPI document says what the API really answers.

FastAPI documents each route's success response and a 422 in its own error format; every
error here is ``{"error": {"code", "message", "field"}}`` instead, and some come from
outside the route (the JSON parser, the body size limit, the database). This module
declares those, adds the batch body the route parses itself, and links operations that
feed each other (create a type, then send one; create a user, then read it; upload a
template, then preview it), so that clients and schemathesis can follow them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute, APIRouter
from starlette.exceptions import HTTPException
from starlette.routing import Match

from tidings.api.auth import route_scope
from tidings.api.errors import error_response
from tidings.api.routes import notifications, preferences, registry, suppressions, templates
from tidings.api.schemas import BatchIn, ErrorResponse
from tidings.intake.requests import NotificationIn

_ERROR = {"$ref": "#/components/schemas/ErrorResponse"}

# Answered by any operation that reads a JSON body, any with parameters, and any at all.
_BODY_ERRORS = {
    "400": "the request body is not valid JSON",
    "413": "the request body is over the size limit",
}
_INVALID = {"422": "a value is invalid; `error.field` names it"}
# The router's own answer when a path parameter cannot be routed (it holds "/" or a line
# break), besides any route's "no such resource".
_UNROUTABLE = {"404": "no such resource, or no route for this path"}
_AUTH_ERRORS = {
    "401": "no valid API key (Authorization: Bearer <key>)",
    "403": "the API key lacks this route's scope",
    "429": "the API key's accept rate is spent; retry after Retry-After seconds",
}
_ANY_ERRORS = {
    # api/text_guard.py: NUL or a lone surrogate in the path, the query or a header.
    "400": "the request holds text no database stores (NUL, a lone surrogate)",
    "500": "internal error; the server log has details",
    "503": "the database is unavailable; retry (with the same Idempotency-Key)",
}


def document(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """Build the app's OpenAPI document once, as FastAPI does, then complete it."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            _add_batch_body(schema)
            _declare_errors(schema)
            _add_links(schema, _operation_ids(routers))
            _declare_scopes(schema, routers)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _add_batch_body(schema: dict[str, Any]) -> None:
    """The notification routes read their bodies themselves (see routes/notifications.py):
    document them."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, model in (("BatchIn", BatchIn), ("NotificationIn", NotificationIn)):
        body = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update({**body.pop("$defs", {}), name: body})


def _declare_errors(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    error = ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update({**error.pop("$defs", {}), "ErrorResponse": error})
    for operations in schema["paths"].values():
        for operation in operations.values():
            codes = dict(_ANY_ERRORS)
            if "requestBody" in operation:
                codes.update(_BODY_ERRORS)  # its 400 says what a body adds
            if "requestBody" in operation or operation.get("parameters"):
                codes.update(_INVALID)
            if any(p["in"] == "path" for p in operation.get("parameters", ())):
                codes.update(_UNROUTABLE)
            responses = operation["responses"]
            for code, description in codes.items():
                if code not in responses or _is_fastapi_validation_error(responses[code]):
                    content = {"application/json": {"schema": _ERROR}}
                    responses[code] = {"description": description, "content": content}
    # FastAPI's own 422 format is never sent.
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)


def _declare_scopes(schema: dict[str, Any], routers: Sequence[APIRouter]) -> None:
    """Each operation says the scope it needs (``x-tidings-scope``; "public": no key) and,
    when it needs one, answers 401 and 403."""
    for route in _api_routes(routers):
        if not route.include_in_schema:
            continue  # an HTML page (/dashboard) or /metrics: no operation to annotate
        scope = route_scope(route.dependencies)
        for method in route.methods or ():
            operation = schema["paths"][route.path_format][method.lower()]
            operation["x-tidings-scope"] = scope
            if scope in (None, "public"):
                operation.pop("security", None)
                continue
            for code, description in _AUTH_ERRORS.items():
                if code == "429" and scope != "send":
                    continue  # only submissions count against a key's rate
                content = {"application/json": {"schema": _ERROR}}
                answer = {"description": description, "content": content}
                operation["responses"].setdefault(code, answer)


def _is_fastapi_validation_error(response: dict[str, Any]) -> bool:
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref", "").endswith("/HTTPValidationError"))


# (from operation, its success status, link name, to operation, how the link fills it)
_LINKS: list[tuple[Callable[..., Any], str, str, Callable[..., Any], dict[str, Any]]] = [
    (registry.put_type, "200", "GetType", registry.get_type,
     {"parameters": {"name": "$response.body#/name"}}),
    (registry.put_type, "200", "SendNotification", notifications.create_notification,
     {"requestBody": {"type": "$response.body#/name"}}),
    (registry.put_type, "200", "UploadTemplate", templates.put_template,
     {"parameters": {"type_name": "$response.body#/name"}}),
    (registry.put_type, "200", "Preview", templates.post_preview,
     {"requestBody": {"type": "$response.body#/name"}}),
    (registry.put_user, "200", "GetUser", registry.get_user,
     {"parameters": {"user_id": "$response.body#/id"}}),
    (registry.put_user, "200", "GetPreferences", preferences.get_preferences,
     {"parameters": {"user_id": "$response.body#/id"}}),
    (registry.put_user, "200", "ListDevices", registry.list_devices,
     {"parameters": {"user_id": "$response.body#/id"}}),
    (registry.post_device, "201", "GetDevice", registry.get_device,
     {"parameters": {"token": "$response.body#/token"}}),
    (registry.post_device, "201", "DeleteDevice", registry.delete_device,
     {"parameters": {"token": "$response.body#/token"}}),
    (templates.put_template, "200", "Preview", templates.post_preview,
     {"requestBody": {"type": "$response.body#/type", "locale": "$response.body#/locale"}}),
    (templates.put_template, "201", "Preview", templates.post_preview,
     {"requestBody": {"type": "$response.body#/type", "locale": "$response.body#/locale"}}),
    (templates.put_template, "201", "GetVersions", templates.get_versions,
     {"parameters": {"type_name": "$response.body#/type", "channel": "$response.body#/channel",
                     "locale": "$response.body#/locale"}}),
    (notifications.create_notification, "202", "GetNotification",
     notifications.get_notification, {"parameters": {"notification_id": "$response.body#/id"}}),
    (suppressions.put_suppression, "200", "GetSuppression", suppressions.get_suppression,
     {"parameters": {"channel": "$response.body#/channel", "address": "$response.body#/address"}}),
    (suppressions.put_suppression, "200", "DeleteSuppression", suppressions.delete_suppression,
     {"parameters": {"channel": "$response.body#/channel", "address": "$response.body#/address"}}),
]  # fmt: skip


def _operation_ids(routers: Sequence[APIRouter]) -> dict[Callable[..., Any], tuple[str, str, str]]:
    """Each endpoint function's (path, method, operationId)."""
    found: dict[Callable[..., Any], tuple[str, str, str]] = {}
    for route in _api_routes(routers):
        for method in route.methods or ():
            found[route.endpoint] = (route.path_format, method.lower(), route.unique_id)
    return found


def _add_links(schema: dict[str, Any], ids: dict[Callable[..., Any], tuple[str, str, str]]) -> None:
    for source, status, name, target, fills in _LINKS:
        path, method, _ = ids[source]
        response = schema["paths"][path][method]["responses"][status]
        response.setdefault("links", {})[name] = {"operationId": ids[target][2], **fills}


def _api_routes(routers: Sequence[APIRouter]) -> Iterator[APIRoute]:
    return (route for router in routers for route in router.routes if isinstance(route, APIRoute))


def allow_every_method(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """A 405 lists in ``Allow`` every method the path has, not only the first route's."""

    @app.exception_handler(405)
    async def _method_not_allowed(request: Request, exc: HTTPException) -> JSONResponse:
        allowed = sorted(
            method
            for route in _api_routes(routers)
            if route.matches(request.scope)[0] is not Match.NONE
            for method in route.methods or ()
        )
        message = f"{request.method} is not allowed here; allowed: {', '.join(allowed)}"
        headers = {"Allow": ", ".join(allowed)}
        return error_response(405, "method_not_allowed", message, headers=headers)
