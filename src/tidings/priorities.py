"""Priorities and the lanes they map to."""

from __future__ import annotations

from enum import StrEnum


class Priority(StrEnum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 is the most urgent."""
        return _RANK[self]

    def at_most(self, ceiling: Priority) -> bool:
        """True when this priority is not more urgent than ``ceiling``."""
        return self.rank >= ceiling.rank


_RANK = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}


class Category(StrEnum):
    TRANSACTIONAL = "transactional"
    REMINDER = "reminder"
    MARKETING = "marketing"


class Channel(StrEnum):
    EMAIL = "email"
    SMS = "sms"
    PUSH = "push"
    WEBHOOK = "webhook"  # an HTTP POST to the recipient's URL, signed (Standard Webhooks)
    INBOX = "inbox"  # kept for the user's in-app feed (docs/inbox.md): no provider
    # Chat: a channel per service, each with its own address (docs/providers.md, Chat).
    SLACK = "slack"  # a conversation id (bot token) or an incoming webhook URL
    DISCORD = "discord"  # a Discord webhook URL
    TEAMS = "teams"  # a Teams Workflows (Power Automate) webhook URL
    TELEGRAM = "telegram"  # a Telegram chat id (or @channel username)
    WHATSAPP = "whatsapp"  # an E.164 number on WhatsApp (Meta's Cloud API)


# The chat channels: an address per service in the user's profile (or ``to``).
CHAT_CHANNELS = (
    Channel.SLACK,
    Channel.DISCORD,
    Channel.TEAMS,
    Channel.TELEGRAM,
    Channel.WHATSAPP,
)
