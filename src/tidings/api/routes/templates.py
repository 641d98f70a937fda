"""Templates: upload versions, list them, and preview what a notification would say."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.preview import preview
from tidings.api.schemas import (
    ErrorResponse,
    PreviewIn,
    PreviewOut,
    TemplateIn,
    TemplateList,
    TemplateOut,
    TemplateVersions,
)
from tidings.content.upload_checks import TemplateProblem
from tidings.intake.requests import Locale, TypeName
from tidings.priorities import Channel
from tidings.services import registry, templates
from tidings.services.templates import TemplateVersion

router = APIRouter(prefix="/v1/templates", tags=["templates"], dependencies=needs(Scope.TEMPLATES))
_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
}


@router.put(
    "/{type_name}/{channel}/{locale}",
    status_code=201,
    response_model=TemplateOut,
    responses={200: {"model": TemplateOut}, **_ERRORS},
)
async def put_template(
    request: Request,
    type_name: Annotated[TypeName, Path()],
    channel: Channel,
    locale: Annotated[Locale, Path()],
    body: TemplateIn,
) -> Any:
    """Upload a new version (201). The same text as the newest version stores nothing
    and answers that version (200)."""
    service = service_of(request)
    kind = await registry.get_type(service.db, type_name)
    if kind is None:
        return error_response(404, "not_found", f"no notification type {type_name!r}", "type")
    parts = body.model_dump(exclude_none=True)
    try:
        row, created = await templates.upload(service, kind, channel, locale, parts)
    except TemplateProblem as problem:
        return error_response(422, problem.code, str(problem), problem.field)
    out = _template_out(row).model_dump(mode="json", by_alias=True, exclude_none=True)
    return JSONResponse(out, status_code=201 if created else 200)


@router.get("/{type_name}/{channel}/{locale}", response_model=TemplateVersions, responses=_ERRORS)
async def get_versions(request: Request, type_name: str, channel: Channel, locale: str) -> Any:
    """Every version, newest first."""
    rows = await templates.versions(service_of(request).db, type_name, channel, locale)
    if not rows:
        return error_response(
            404, "not_found", f"no template for {type_name} on {channel.value} in {locale}"
        )
    return TemplateVersions(versions=[_template_out(row) for row in rows])


@router.get("/{type_name}", response_model=TemplateList)
async def list_templates(request: Request, type_name: str) -> Any:
    """The newest version of each (channel, locale) of a type."""
    rows = await templates.latest(service_of(request).db, type_name)
    return TemplateList(templates=[_template_out(row) for row in rows])


def _template_out(row: TemplateVersion) -> TemplateOut:
    return TemplateOut(**row.parts())


@router.post("/preview", response_model=PreviewOut, responses=_ERRORS)
async def post_preview(request: Request, body: PreviewIn) -> Any:
    """Render a type for a user (their locale) or for sample data, on each of its channels
    (or those asked for). A channel that cannot be rendered shows its error."""
    service = service_of(request)
    kind = await registry.get_type(service.db, body.type)
    if kind is None:
        return error_response(404, "not_found", f"no notification type {body.type!r}", "type")
    return await preview(service, kind, body)
