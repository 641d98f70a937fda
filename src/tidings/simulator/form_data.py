"""HTML form bodies as Mailgun's API takes them: urlencoded or multipart/form-data.

Parsed here with the standard library (no python-multipart): a multipart body is a MIME
message once its Content-Type header is put in front of it. A file part keeps its name
with the file's name as the value (the simulator records, it does not store, files).
"""

from __future__ import annotations

from email import policy
from email.message import Message
from email.parser import BytesParser
from urllib.parse import parse_qsl

Form = dict[str, list[str]]


def parse(content_type: str, body: bytes) -> Form | None:
    """Each field with its values, in order; None for another content type or a body that
    is not one."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return _urlencoded(body)
    if kind == "multipart/form-data":
        return _multipart(content_type, body)
    return None


def _urlencoded(body: bytes) -> Form | None:
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        return None
    form: Form = {}
    for name, value in pairs:
        form.setdefault(name, []).append(value)
    return form


def _multipart(content_type: str, body: bytes) -> Form | None:
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        return None
    form: Form = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        form.setdefault(name, []).append(_value(part))
    return form


def _value(part: Message) -> str:
    filename = part.get_filename()
    if filename:
        return filename
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else b""
    return data.decode(part.get_content_charset() or "utf-8", errors="replace")
