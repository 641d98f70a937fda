"""Every error the API returns is JSON: ``{"error": {"code", "message", "field"}}``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import asyncpg
import asyncpg.exceptions
import sqlalchemy as sa
from asyncpg.exceptions import _base as asyncpg_base
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from tidings.group_commit import CommitAborted
from tidings.refusal import Refusal
from tidings.services.health import unavailable

log = logging.getLogger(__name__)


def error_response(
    status_code: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
    problems: list[dict[str, str | None]] | None = None,
) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message, "field": field}
    if problems:
        # All at once: a producer fixes a missing header and a bad body in one round.
        error["problems"] = problems
    return JSONResponse({"error": error}, status_code=status_code, headers=headers)


def _problem(error: dict[str, Any]) -> dict[str, str | None]:
    return {"field": _error_field(error), "message": validation_message(error)}


def _error_field(error: dict[str, Any]) -> str | None:
    # A JSON syntax error's location is a character offset ("body", 1), not a field.
    if error.get("type") == "json_invalid":
        return None
    return field_name(error.get("loc", ()))


def field_name(location: tuple[Any, ...] | list[Any]) -> str | None:
    """``("body", "to", "email")`` -> ``"to.email"``; headers keep their HTTP spelling."""
    parts = [str(p) for p in location]
    if parts and parts[0] == "header":
        return (
            "-".join(word.capitalize() for word in parts[1].split("-")) if len(parts) > 1 else None
        )
    if parts and parts[0] in ("body", "query", "path"):
        parts = parts[1:]
    return ".".join(parts) or None


def validation_message(error: dict[str, Any]) -> str:
    field = field_name(error.get("loc", ()))
    message = str(error.get("msg", "invalid value"))
    if error.get("type") == "missing":
        if field:
            return f"{field} is required"
        # ("body",): nothing was sent where a JSON object is expected.
        return "the request body is required" if _is_body(error) else "a required value is missing"
    if error.get("type") == "extra_forbidden":
        return f"unknown field {field}"
    if error.get("type") == "json_invalid":
        return "the request body is not valid JSON"
    if error.get("type") == "value_error":
        # Our validators' own words; pydantic's "Value error, " prefix says nothing more.
        message = message.removeprefix("Value error, ")
    return f"{field}: {message}" if field else message


def _is_body(error: dict[str, Any]) -> bool:
    return tuple(error.get("loc", ())) == ("body",)


def database_unavailable(exc: BaseException) -> bool:
    return unavailable(exc)


def _unavailable_response(exc: Exception) -> JSONResponse:
    # Committed or not, a retry with the same Idempotency-Key is safe.
    log.warning("database unavailable: %s", type(exc).__name__)
    return error_response(
        503,
        "database_unavailable",
        "the database is unavailable; retry with the same Idempotency-Key",
        headers={"Retry-After": "1"},
    )


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        found = exc.errors()
        first = found[0] if found else {}
        status_code = 400 if first.get("type") == "json_invalid" else 422
        response = error_response(
            status_code,
            "invalid_request",
            validation_message(first),
            _error_field(first),
            problems=[_problem(error) for error in found] if len(found) > 1 else None,
        )
        return response

    @app.exception_handler(Refusal)
    async def _refused(_request: Request, exc: Refusal) -> JSONResponse:
        return error_response(exc.status_code, exc.code, exc.message, exc.field, exc.headers)

    @app.exception_handler(HTTPException)
    async def _http(_request: Request, exc: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}.get(
            exc.status_code, "http_error"
        )
        return error_response(exc.status_code, code, str(exc.detail), headers=exc.headers)

    @app.exception_handler(sa.exc.DBAPIError)
    async def _database(_request: Request, exc: sa.exc.DBAPIError) -> JSONResponse:
        if not database_unavailable(exc):
            return await _unexpected(_request, exc)
        return _unavailable_response(exc)

    @app.exception_handler(sa.exc.TimeoutError)
    async def _pool_timeout(_request: Request, exc: sa.exc.TimeoutError) -> JSONResponse:
        return _unavailable_response(exc)

    @app.exception_handler(asyncpg.PostgresError)
    @app.exception_handler(asyncpg.exceptions.InterfaceError)
    @app.exception_handler(asyncpg_base.InternalClientError)
    async def _asyncpg(_request: Request, exc: Exception) -> JSONResponse:
        # Raised through Database.asyncpg (intake's hot path), unwrapped by SQLAlchemy.
        if not unavailable(exc):
            return await _unexpected(_request, exc)
        return _unavailable_response(exc)

    @app.exception_handler(CommitAborted)
    async def _aborted(_request: Request, exc: CommitAborted) -> JSONResponse:
        return _unavailable_response(exc)

    @app.exception_handler(OSError)
    async def _os_error(_request: Request, exc: OSError) -> JSONResponse:
        return _unavailable_response(exc)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=exc)
        return error_response(500, "internal_error", "internal error; the server log has details")
