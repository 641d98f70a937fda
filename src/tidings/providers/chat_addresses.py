"""The addresses of the chat channels: what each accepts, in the one form it is stored in.

Checked at the API (the user's profile, ``to``) so that a malformed or unsupported address is
a 422 naming the field, and read again by the adapters. Webhook URLs are accepted only on
their service's own hosts, so the chat channels never post to an arbitrary URL (the
``webhook`` channel is the one for that, behind its address checks). An account's
``base_url`` replaces the origin of a stored URL (the simulator, a proxy): ``at_origin``.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from tidings.providers.ssrf import url_problem

MAX_URL_LENGTH = 2048

# Slack: a conversation id (C public, G private, D direct message; U or W a user, whom the
# bot messages in its app's DM), or an incoming webhook's URL.
SLACK_ID = re.compile(r"[CDGUW][A-Z0-9]{2,31}")
SLACK_WEBHOOK = re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+")
DISCORD_WEBHOOK = re.compile(
    r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/(?:v\d+/)?webhooks/"
    r"(?P<id>[0-9]{15,25})/(?P<token>[A-Za-z0-9_-]{20,100})"
)
# Teams Workflows (Power Automate) "When a Teams webhook request is received" URLs.
TEAMS_HOSTS = (".logic.azure.com", ".api.powerplatform.com")
# The retired Office 365 connectors (incoming webhooks of the old kind).
TEAMS_CONNECTOR_HOSTS = (".webhook.office.com", "outlook.office.com", "outlook.office365.com")
WHATSAPP_NUMBER = re.compile(r"\+[1-9][0-9]{6,14}")
TELEGRAM_CHAT = re.compile(r"-?[1-9][0-9]{0,19}|@[A-Za-z][A-Za-z0-9_]{4,31}")


def slack_address(value: str) -> str:
    """A Slack conversation id or incoming webhook URL, as given."""
    if SLACK_ID.fullmatch(value) or SLACK_WEBHOOK.fullmatch(value):
        return value
    raise ValueError(
        "slack must be a conversation or user id (C…, G…, D…, U…, W…) or an incoming "
        "webhook URL https://hooks.slack.com/services/T…/B…/…"
    )


def is_slack_webhook(address: str) -> bool:
    return address.startswith("https://")


def discord_address(value: str) -> str:
    """A Discord webhook URL, as https://discord.com/api/webhooks/{id}/{token}."""
    match = DISCORD_WEBHOOK.fullmatch(value.split("?", 1)[0])
    if match is None:
        raise ValueError(
            "discord must be a webhook URL https://discord.com/api/webhooks/{id}/{token}"
        )
    return f"https://discord.com/api/webhooks/{match['id']}/{match['token']}"


def teams_address(value: str) -> str:
    """A Teams Workflows webhook URL, as given; an Office 365 connector's is refused."""
    if len(value) > MAX_URL_LENGTH or url_problem(value) is not None:
        raise ValueError("teams must be an https URL of at most 2048 characters")
    parts = urlsplit(value)
    host = (parts.hostname or "").lower()
    if any(host == h.lstrip(".") or host.endswith(h) for h in TEAMS_CONNECTOR_HOSTS):
        raise ValueError(
            "teams: Office 365 connectors (webhook.office.com) are retired and not supported; "
            "use a Workflows webhook (Teams: Workflows, 'Post to a channel when a webhook "
            "request is received')"
        )
    if parts.scheme != "https" or not host.endswith(TEAMS_HOSTS):
        raise ValueError(
            "teams must be a Workflows webhook URL (https://….logic.azure.com/… or "
            "https://….api.powerplatform.com/…)"
        )
    return value


def telegram_address(value: str) -> str:
    """A Telegram chat id (a user, group or supergroup: -100…) or a channel's @username."""
    if TELEGRAM_CHAT.fullmatch(value):
        return value
    raise ValueError("telegram must be a chat id (digits, - for groups) or an @channel username")


def whatsapp_address(value: str) -> str:
    """A WhatsApp number, in E.164 (``+`` and its digits)."""
    if WHATSAPP_NUMBER.fullmatch(value):
        return value
    raise ValueError("whatsapp must be a number in E.164 format, for example +5511912345678")


def at_origin(url: str, base_url: str | None) -> str:
    """``url`` with its scheme and host replaced by ``base_url``'s (path and query kept)."""
    if not base_url:
        return url
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    return base_url.rstrip("/") + target
