"""Logging for every ``tidings`` command (docs/operations.md, Logs): JSON lines when stderr
is not a terminal (or ``TIDINGS_LOG_FORMAT=json``), the human format on a terminal (or
``TIDINGS_LOG_FORMAT=text``); ``TIDINGS_LOG_LEVEL`` for tidings' own loggers.

Context fields (the request id, the delivery being sent) live in a contextvar, so that a log
call anywhere below the HTTP middleware or a send carries them without being passed them.
What must never be logged (bodies, addresses, credentials) is kept out at each call;
``redact`` is only the last line of defence, for the obvious shapes.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

# The fields a record may carry besides its message, in the order they are written.
FIELDS = (
    "request_id",
    "notification_id",
    "delivery_id",
    "campaign_id",
    "channel",
    "account",
    "status",
    "failure_kind",
    "reason",
)
# Loggers that follow TIDINGS_LOG_LEVEL. Every other library logs WARNING and above only:
# at DEBUG, HTTP/2 and SMTP clients print headers and whole messages.
OWN_LOGGERS = ("tidings", "uvicorn", "alembic")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Values as they were bound (ids, mostly): made text only when a record is written, as
# most contexts (one per delivery sent) never log a line.
_context: contextvars.ContextVar[Mapping[str, object] | None] = contextvars.ContextVar(
    "tidings_log_context", default=None
)
# Fields made only if a record is written: a send binds its delivery's this way, at the
# cost of one contextvar set, since nearly every send logs nothing.
_lazy: contextvars.ContextVar[Callable[[], Mapping[str, object]] | None] = contextvars.ContextVar(
    "tidings_log_lazy_context", default=None
)


def bind(**fields: object) -> contextvars.Token[Mapping[str, object] | None]:
    """Add ``fields`` to every record logged from this context on; ``unbind`` the token."""
    found = {name: value for name, value in fields.items() if value is not None}
    return _context.set({**(_context.get() or {}), **found})


def unbind(token: contextvars.Token[Mapping[str, object] | None]) -> None:
    _context.reset(token)


@contextmanager
def bound(**fields: object) -> Iterator[None]:
    token = bind(**fields)
    try:
        yield
    finally:
        unbind(token)


def bind_lazily(source: Callable[[], Mapping[str, object]]) -> None:
    """Bind, for the rest of this context (a task's own), the fields ``source`` gives when
    a record is written; they come after those bound with ``bind``."""
    _lazy.set(source)


def context_without() -> contextvars.Context:
    """A copy of the current context with no fields bound: for a task that works for many
    requests, whose lines must not carry the first one's id."""
    context = contextvars.copy_context()
    context.run(_context.set, None)
    context.run(_lazy.set, None)
    return context


def fields_of(record: logging.LogRecord) -> dict[str, str]:
    """The record's context fields: the bound ones, then those given with ``extra=``."""
    found = dict(_context.get() or {})
    lazy = _lazy.get()
    if lazy is not None:
        found.update((name, value) for name, value in lazy().items() if value is not None)
    given = record.__dict__
    for name in FIELDS:
        value = given.get(name)
        if value is not None:
            found[name] = value
    return {name: str(found[name]) for name in FIELDS if name in found}


def _mask_email(match: re.Match[str]) -> str:
    local, _, domain = match.group(0).rpartition("@")
    return f"{local[:1]}***@{domain}"


_PRIVATE_KEY = r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
_EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
# The obvious shapes of what must not be in a log, each with its replacement.
_SHAPES: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(_PRIVATE_KEY, re.S), "[private key]"),
    (re.compile(r"\b((?i:bearer|basic))\s+[A-Za-z0-9._~+/-]{16,}=*"), r"\1 [redacted]"),
    (re.compile(r"\btdk_[A-Za-z0-9_-]{4,}"), "tdk_[redacted]"),
    (re.compile(r"\bwhsec_[A-Za-z0-9+/=_-]{4,}"), "whsec_[redacted]"),
    (re.compile(r"\bSG\.[A-Za-z0-9_.-]{6,}"), "SG.[redacted]"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_.-]*"), "[jwt]"),
    # A query string often carries a token (signed links, SNS confirmations).
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s?#'\"]*)\?[^\s#'\"]*"), r"\1?…"),
    (re.compile(_EMAIL), _mask_email),
    (re.compile(r"(?<![\w+])\+\d{7,15}\b"), lambda m: m.group(0)[:3] + "…" + m.group(0)[-2:]),
)


def redact(text: str) -> str:
    """``text`` with credential shapes, query strings, email addresses and phone numbers
    replaced: the net under the rule that log calls never pass such values."""
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


# Path prefixes whose next segments are tokens or addresses: masked in access lines.
_SECRET_PATHS = re.compile(r"^(/u/|/p/|/t/|/v1/devices/|/v1/suppressions/[^/]+/).+$")


def safe_path(path: str) -> str:
    """An HTTP path for the log: no query string (it can carry tokens), and the signed
    tokens of /u/, /p/ and /t/ links, device tokens and suppressed addresses masked."""
    path = path.split("?", 1)[0]
    return _SECRET_PATHS.sub(r"\1…", path)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, the context fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": redact(record.getMessage()),
            **fields_of(record),
        }
        if record.exc_info:
            entry["exc"] = redact(self.formatException(record.exc_info))
        if record.stack_info:
            entry["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """The human format, with the context fields after the message."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        found = fields_of(record)
        if found:
            text += " [" + " ".join(f"{k}={v}" for k, v in found.items()) + "]"
        return redact(text)


def _timestamp(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


class _AccessPaths(logging.Filter):
    """uvicorn's access line with a safe path: its arguments are (client, method, path with
    query, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            record.args = (args[0], args[1], safe_path(str(args[2])), args[3], args[4])
        return True


_ACCESS_FILTER = _AccessPaths()


def configure(stream: TextIO | None = None, environ: Mapping[str, str] = os.environ) -> None:
    """Send every record to ``stream`` (stderr) in the chosen format; replaces any earlier
    configuration, so calling it again is harmless."""
    out = stream if stream is not None else sys.stderr
    level, level_problem = _level(environ.get("TIDINGS_LOG_LEVEL"))
    chosen, format_problem = _format(environ.get("TIDINGS_LOG_FORMAT"), out)
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter() if chosen == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(level, logging.WARNING))
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(level)
    # Alembic names each of its plugins at INFO on every start: noise, not news.
    logging.getLogger("alembic.runtime.plugins").setLevel(max(level, logging.WARNING))
    access = logging.getLogger("uvicorn.access")
    if _ACCESS_FILTER not in access.filters:
        access.addFilter(_ACCESS_FILTER)
    logging.captureWarnings(True)  # warnings become records too: every line is JSON
    for problem in (level_problem, format_problem):
        if problem:
            logging.getLogger(__name__).warning("%s", problem)


def _level(given: str | None) -> tuple[int, str | None]:
    if not given:
        return logging.INFO, None
    found = logging.getLevelName(given.strip().upper())
    if isinstance(found, int):
        return found, None
    levels = "DEBUG, INFO, WARNING, ERROR"
    return logging.INFO, f"TIDINGS_LOG_LEVEL={given!r} is not a level ({levels}); using INFO"


def _format(given: str | None, stream: TextIO) -> tuple[str, str | None]:
    wanted = (given or "").strip().lower()
    if wanted in ("json", "text"):
        return wanted, None
    automatic = "text" if _is_terminal(stream) else "json"
    if not wanted:
        return automatic, None
    return automatic, f"TIDINGS_LOG_FORMAT={given!r} is neither json nor text; using {automatic}"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real file
        return False
