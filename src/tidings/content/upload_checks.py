"""What a template upload must satisfy: the parts its channel needs, and safe Jinja2."""

from __future__ import annotations

from typing import Any

from tidings.content.render import TemplateRejected, compile_part
from tidings.priorities import Channel
from tidings.store.types import NotificationType

# Which parts each channel needs, and which it may have.
REQUIRED = {
    Channel.EMAIL: ("subject",),
    Channel.SMS: ("text",),
    Channel.PUSH: ("text",),
    Channel.WEBHOOK: (),
    Channel.SLACK: ("text",),
    Channel.DISCORD: ("text",),
    Channel.TEAMS: ("text",),
    Channel.TELEGRAM: (),  # text or html (below)
    Channel.WHATSAPP: (),  # text, or data naming an approved template (below)
    Channel.INBOX: ("text",),
}
ALLOWED = {
    Channel.EMAIL: {"subject", "text", "html"},
    Channel.SMS: {"text"},
    Channel.PUSH: {"subject", "text", "data"},
    # The JSON body: each data key rendered; without data, the notification's data as is.
    Channel.WEBHOOK: {"data"},
    # Chat: the subject is the title (Slack's header block, Discord's embed title, the
    # card's heading, Telegram's bold first line), the text its body. Telegram may have
    # html instead of text (its HTML parse mode; every variable escaped).
    Channel.SLACK: {"subject", "text"},
    Channel.DISCORD: {"subject", "text"},
    Channel.TEAMS: {"subject", "text"},
    Channel.TELEGRAM: {"subject", "text", "html"},
    # WhatsApp: data names an approved template (data.template, data.language) and maps
    # its body parameters ("1", "2"...); text is free text, only inside the 24-hour window.
    Channel.WHATSAPP: {"text", "data"},
    # The feed's item: subject is its title, text its body, data its keys (actionUrl...).
    Channel.INBOX: {"subject", "text", "data"},
}
RESERVED_PUSH_KEYS = ("from", "message_type", "google", "gcm", "aps")


class TemplateProblem(ValueError):
    def __init__(self, code: str, message: str, field: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


def check_template(kind: NotificationType, channel: Channel, parts: dict[str, Any]) -> None:
    """Raise ``TemplateProblem`` for an upload that could never be sent."""
    if channel.value not in kind.channels:
        raise TemplateProblem(
            "channel_not_allowed",
            f"type {kind.name!r} does not send on {channel.value} (its channels: "
            f"{', '.join(kind.channels)})",
            "channel",
        )
    given = {name for name, value in parts.items() if value is not None}
    for name in REQUIRED[channel]:
        if name not in given:
            raise TemplateProblem(
                "missing_part", f"{_article(channel.value)} template needs {name}", name
            )
    if channel in (Channel.EMAIL, Channel.TELEGRAM) and not given & {"text", "html"}:
        raise TemplateProblem(
            "missing_part", f"{_article(channel.value)} template needs text or html", "text"
        )
    for name in sorted(given - ALLOWED[channel]):
        raise TemplateProblem(
            "unexpected_part", f"{_article(channel.value)} template has no {name}", name
        )
    if channel is Channel.WHATSAPP:
        _check_whatsapp(parts)
    if channel is Channel.PUSH:
        _check_push_keys(parts.get("data") or {})
    _compile_all(parts)


def _article(channel: str) -> str:
    """``an email``, ``an sms`` (said "es-em-es"), ``an inbox``, ``a push``, ``a webhook``."""
    return f"{'an' if channel in ('email', 'sms', 'inbox') else 'a'} {channel}"


def _check_push_keys(data: dict[str, Any]) -> None:
    for key in data:
        if key.lower().startswith(RESERVED_PUSH_KEYS) or not key:
            raise TemplateProblem(
                "reserved_key", f"push data key {key!r} is reserved by FCM or APNs", "data"
            )


def _check_whatsapp(parts: dict[str, Any]) -> None:
    data = parts.get("data") or {}
    if not parts.get("text") and not data.get("template"):
        raise TemplateProblem(
            "missing_part", "a whatsapp template needs data.template (approved) or text", "data"
        )
    if data.get("template") and not data.get("language"):
        raise TemplateProblem("missing_part", "data.language names the template's", "data")
    for key in data:
        if key not in ("template", "language") and not key.isdigit():
            raise TemplateProblem(
                "unexpected_part",
                f"whatsapp data key {key!r}: template, language, or a parameter number",
                "data",
            )


def _compile_all(parts: dict[str, Any]) -> None:
    try:
        for name in ("subject", "text", "html"):
            if parts.get(name) is not None:
                compile_part(name, parts[name], html=name == "html")
        for key, value in (parts.get("data") or {}).items():
            compile_part(f"data.{key}", value)
    except TemplateRejected as rejected:
        raise TemplateProblem("invalid_template", str(rejected), rejected.part) from None
