"""Rendering a type for a user or sample data, per channel, without sending anything."""

from __future__ import annotations

from tidings.api.schemas import PreviewChannel, PreviewIn, PreviewOut, SegmentsOut
from tidings.content.compose import compose
from tidings.content.limits import push_payload_bytes
from tidings.content.render import RenderError
from tidings.content.variables import template_variables
from tidings.priorities import Channel
from tidings.service import Service
from tidings.services import registry
from tidings.services.registry import NotificationType


async def preview(service: Service, kind: NotificationType, body: PreviewIn) -> PreviewOut:
    profile = None
    if body.user_id is not None:
        profile = await registry.get_user(service.db, body.user_id)
    locale = body.locale or (profile.locale if profile else None)
    channels = [c.value for c in body.channels] if body.channels else list(kind.channels)
    public = service.settings.public_url
    preferences_url = f"{public}/p/PREVIEW" if body.user_id is not None else None
    context = template_variables(
        body.data, body.user_id, profile, locale, f"{public}/u/PREVIEW", preferences_url
    )
    # Versions stored through another process show within the catalog's max_age.
    await service.templates.refresh_if_stale()
    out: dict[str, PreviewChannel] = {}
    for channel in channels:
        try:
            rendered = await compose(
                service.templates,
                kind.name,
                channel,
                locale,
                kind.default_locale,
                context,
                service.settings.sms_max_segments,
            )
        except RenderError as error:
            out[channel] = PreviewChannel(error=str(error))
            continue
        content = rendered.content
        segments = rendered.segments
        out[channel] = PreviewChannel(
            locale=rendered.template.locale,
            version=rendered.template.version,
            subject=content.subject,
            text=content.text,
            html=content.html,
            data=content.data or None,
            segments=SegmentsOut(**vars(segments)) if segments else None,
            payload_bytes=push_payload_bytes(content) if channel == Channel.PUSH else None,
        )
    return PreviewOut(channels=out)
