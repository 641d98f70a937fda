"""The text of a Telegram message and its parse mode, escaped by the Bot API's rules
(core.telegram.org/bots/api#formatting-options): HTML escapes ``&``, ``<``, ``>``;
MarkdownV2 puts a backslash before each of ``_*[]()~`>#+-=|{}.!`` and ``\\``. Everything
the template's text renders is escaped, so data cannot open an entity or break the parse;
the subject is bold. A template's ``html`` part was rendered with every variable escaped
and is sent as HTML as it is."""

from __future__ import annotations

import html
import re

from tidings.providers._chat import body, title
from tidings.providers.base import Message

MARKDOWN_RESERVED = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
TAG = re.compile(r"<[^>]*>")


def escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_markdown(text: str) -> str:
    return MARKDOWN_RESERVED.sub(r"\\\1", text)


def compose(message: Message, parse_mode: str) -> tuple[str, str | None]:
    """The text to send and its parse mode (None: plain)."""
    heading = title(message)
    if message.content.html:
        bold = f"<b>{escape_html(heading)}</b>\n" if heading else ""
        link = message.unsubscribe_url
        footer = f'\n\n<a href="{escape_html(link)}">Unsubscribe</a>' if link else ""
        return f"{bold}{message.content.html.strip()}{footer}", "HTML"
    text = body(message)
    if parse_mode == "HTML":
        bold = f"<b>{escape_html(heading)}</b>\n" if heading else ""
        return bold + escape_html(text), "HTML"
    if parse_mode == "MarkdownV2":
        bold = f"*{escape_markdown(heading)}*\n" if heading else ""
        return bold + escape_markdown(text), "MarkdownV2"
    return (f"{heading}\n{text}" if heading else text), None


def visible_length(text: str, parse_mode: str | None) -> int:
    """About the length Telegram counts (after parsing entities) against its 4,096."""
    if parse_mode == "HTML":
        return len(html.unescape(TAG.sub("", text)))
    if parse_mode == "MarkdownV2":
        return len(re.sub(r"\\(.)", r"\1", text).replace("*", ""))
    return len(text)
