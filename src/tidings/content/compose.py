"""From a delivery to its words: pick the template (locale fallback), render, check limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidings.content.catalog import TemplateCatalog
from tidings.content.limits import check
from tidings.content.locales import fallback_chain
from tidings.content.render import CompiledTemplate, RenderError
from tidings.content.sms import Segments
from tidings.providers.base import Content


class NoTemplate(RenderError):
    """No template for this type, channel and locale chain."""


@dataclass(frozen=True)
class Rendered:
    content: Content
    template: CompiledTemplate
    segments: Segments | None = None


async def compose(
    catalog: TemplateCatalog,
    type_name: str,
    channel: str,
    locale: str | None,
    type_default_locale: str | None,
    context: dict[str, Any],
    sms_max_segments: int,
    version: int | None = None,
) -> Rendered:
    """The rendered content, or ``RenderError`` (no template, render failure, over a limit).
    ``version``: the words of that version of the locale the chain picks (a delivery shown
    again with the version it was sent with), rather than the newest."""
    chain = fallback_chain(locale, type_default_locale)
    template = catalog.find(type_name, channel, chain) or await catalog.resolve(
        type_name, channel, chain
    )
    if template is None:
        raise NoTemplate(f"no template for {type_name} on {channel} ({', '.join(chain)})")
    if version is not None and version != template.version:
        older = await catalog.version(type_name, channel, template.locale, version)
        if older is None:
            shown = f"{type_name} on {channel} ({template.locale})"
            raise NoTemplate(f"no version {version} of {shown}")
        template = older
    content = await template.render_async(context)
    return Rendered(content, template, check(channel, content, sms_max_segments))
