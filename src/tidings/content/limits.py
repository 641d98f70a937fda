"""Per-channel limits on rendered content, checked before a provider sees it."""

from __future__ import annotations

import json

from tidings.content.render import RenderError
from tidings.content.sms import Segments, segments
from tidings.priorities import Channel
from tidings.providers.base import Content

# APNs and FCM both refuse a payload over 4 KB.
PUSH_MAX_BYTES = 4096
# An inbox message is kept for months and sent to browsers whole: a title, a body and a
# few links, not a document.
INBOX_MAX_SUBJECT = 500
INBOX_MAX_TEXT = 10_000
INBOX_MAX_DATA_BYTES = 8192


def push_payload_bytes(content: Content) -> int:
    """The size of the APNs payload this content becomes (FCM's is about the same)."""
    alert = {"title": content.subject, "body": content.text}
    payload = {"aps": {"alert": alert}, **content.data}
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())


def check(channel: str, content: Content, sms_max_segments: int) -> Segments | None:
    """Raise ``RenderError`` when the content cannot be sent on ``channel``; for SMS, the
    segments it takes."""
    if channel == Channel.SMS.value:
        if len(content.text) > sms_max_segments * 160:  # more than that many segments
            raise RenderError(
                f"SMS of {len(content.text)} characters; the limit is {sms_max_segments} segments"
            )
        counted = segments(content.text)
        if counted.count > sms_max_segments:
            raise RenderError(
                f"SMS of {counted.count} segments ({counted.encoding}, {counted.units} "
                f"units); the limit is {sms_max_segments}"
            )
        if not content.text:
            raise RenderError("the SMS text rendered empty")
        return counted
    if channel == Channel.PUSH.value:
        size = push_payload_bytes(content)
        if size > PUSH_MAX_BYTES:
            raise RenderError(f"push payload of {size} bytes; the limit is {PUSH_MAX_BYTES}")
    if channel == Channel.INBOX.value:
        _check_inbox(content)
    if channel == Channel.EMAIL.value and not (content.subject or "").strip():
        raise RenderError("the email subject rendered empty")
    return None


def _check_inbox(content: Content) -> None:
    if len(content.subject or "") > INBOX_MAX_SUBJECT:
        raise RenderError(f"inbox subject over {INBOX_MAX_SUBJECT} characters")
    if len(content.text) > INBOX_MAX_TEXT:
        raise RenderError(f"inbox text over {INBOX_MAX_TEXT} characters")
    if not content.text.strip():
        raise RenderError("the inbox text rendered empty")
    size = len(json.dumps(content.data, separators=(",", ":"), ensure_ascii=False).encode())
    if size > INBOX_MAX_DATA_BYTES:
        raise RenderError(f"inbox data of {size} bytes; the limit is {INBOX_MAX_DATA_BYTES}")
