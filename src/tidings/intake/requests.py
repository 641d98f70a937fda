"""The notification requests the intake accepts, as the HTTP API receives them (camelCase
on the wire), with the field types and validators they need.

They live in the intake, the code that consumes them; ``api/schemas.py`` builds its batch
and other bodies on them, so the API accepts exactly these shapes (docs/architecture.md,
Import layers: intake imports nothing from api).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from email_validator import EmailNotValidError, validate_email
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

from tidings.priorities import Category, Channel, Priority
from tidings.providers import chat_addresses
from tidings.providers.ssrf import url_problem

# fullmatch everywhere: with match() and "$", "+15559990000\n" passed (and skipped the
# suppression of +15559990000).
_E164 = re.compile(r"\+[1-9][0-9]{1,14}")  # not \d: it matches other digits too


def _e164(value: str) -> str:
    if not _E164.fullmatch(value):
        raise ValueError("phone must be in E.164 format, for example +5511912345678")
    return value


def _http_url(value: str) -> str:
    """An http(s) URL that every URL parser reads alike (providers/ssrf.py): checked here,
    not when it fails six times inside the HTTP client."""
    problem = url_problem(value)
    if problem is not None:
        raise ValueError(f"webhookUrl {problem}")
    return value


MAX_JSON_DEPTH = 32


def json_depth_over(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` deep (iteratively:
    a deep value must not exhaust the stack checking it)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


# sendAt is stored as UTC: a far date in a far offset does not convert (9999-12-31 at -14:00).
MAX_SEND_AHEAD = timedelta(days=365)


def _send_at(value: datetime) -> datetime:
    try:
        in_utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError("sendAt is out of range") from None
    if in_utc > datetime.now(UTC) + MAX_SEND_AHEAD:
        raise ValueError(f"sendAt must be at most {MAX_SEND_AHEAD.days} days ahead") from None
    return value


# Plain ASCII addresses (nearly all of them) are checked here; anything else goes to the
# full validator, which is correct but costs ~40 µs an address, a third of a batch's time.
_ASCII_EMAIL = re.compile(
    r"(?P<local>[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"
    r"@(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
)


def _email(value: str) -> str:
    match = _ASCII_EMAIL.fullmatch(value) if value.isascii() and len(value) <= 254 else None
    if match and len(match["local"]) <= 64:
        return f"{match['local']}@{match['domain'].lower()}"
    try:
        return validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as error:
        raise ValueError(f"not a valid email address: {error}") from None


# The OpenAPI document says what the validators accept (clients and schemathesis read it).
Email = Annotated[str, AfterValidator(_email), Field(json_schema_extra={"format": "email"})]
Phone = Annotated[
    str, AfterValidator(_e164), Field(json_schema_extra={"pattern": r"^\+[1-9][0-9]{1,14}$"})
]
# pydantic's patterns run on Rust's regex engine, where "$" is the end of the text (a final
# newline does not match; tests/integration/test_input_limits.py checks it). 35: the locale columns.
Locale = Annotated[
    str, StringConstraints(max_length=35, pattern=r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$")
]
SendAt = Annotated[AwareDatetime, AfterValidator(_send_at)]
TypeName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._:-]{0,99}$")]
UserId = Annotated[str, StringConstraints(min_length=1, max_length=255)]
# A producer whose user ids are numbers (a BIGINT key) may send them as JSON numbers: 42 is
# the user "42". Integers only (42.0 or true is a mistake, not an id), within BIGINT.
MAX_NUMERIC_USER_ID = 2**63 - 1


def _numeric_user_id(value: Any) -> Any:
    if isinstance(value, bool | float):
        raise ValueError("userId must be a string or an integer")
    if isinstance(value, int):
        if not 0 <= value <= MAX_NUMERIC_USER_ID:
            raise ValueError(f"userId as a number must be from 0 to {MAX_NUMERIC_USER_ID}")
        return str(value)
    return value


UserIdIn = Annotated[
    UserId,
    BeforeValidator(_numeric_user_id),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "minLength": 1, "maxLength": 255},
                {"type": "integer", "minimum": 0, "maximum": MAX_NUMERIC_USER_ID},
            ],
            "description": "a user id; a JSON integer is the user whose id is its decimal text",
        },
        mode="validation",
    ),
]
# At most 1,024: addresses sit in btree indexes, whose entries must stay under ~2.7 kB.
DeviceToken = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
WebhookUrl = Annotated[
    str,
    StringConstraints(max_length=2048),
    AfterValidator(_http_url),
]
IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=255)]
# The chat channels' addresses (providers/chat_addresses.py), bounded before they are read.
SlackAddress = Annotated[
    str, StringConstraints(max_length=255), AfterValidator(chat_addresses.slack_address)
]
DiscordAddress = Annotated[
    str, StringConstraints(max_length=255), AfterValidator(chat_addresses.discord_address)
]
TeamsAddress = Annotated[
    str, StringConstraints(max_length=2048), AfterValidator(chat_addresses.teams_address)
]
WhatsAppAddress = Annotated[
    str, StringConstraints(max_length=16), AfterValidator(chat_addresses.whatsapp_address)
]
TelegramAddress = Annotated[
    str, StringConstraints(max_length=33), AfterValidator(chat_addresses.telegram_address)
]
# A display name in a From header: one line (a CR or LF would start a header of its own).
DisplayName = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[^\r\n]*$")]
# Copies per email: enough for a team, too few to turn one notification into a mailing.
MAX_COPIES = 10


_PRIORITY_NAMES: dict[str, Priority | Category] = {
    **{p.value: p for p in Priority},
    **{c.value: c for c in Category},
}


def _priority_or_category(value: Any) -> Priority | Category:
    if isinstance(value, Priority | Category):
        return value
    if isinstance(value, str) and value in _PRIORITY_NAMES:
        return _PRIORITY_NAMES[value]
    raise ValueError(
        "priority must be high, normal or low, or the type's category (transactional, "
        "reminder or marketing)"
    )


# A priority, or the type's category named as one (the type still decides the priority).
PriorityIn = Annotated[
    Priority | Category,
    PlainValidator(_priority_or_category),
    PlainSerializer(lambda name: name.value, return_type=str),
    WithJsonSchema(
        {
            "type": "string",
            "enum": list(_PRIORITY_NAMES),
            "description": "high, normal or low: at most the type's priority; or the type's "
            "category, which leaves the type's priority",
        },
        mode="validation",
    ),
]


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class Recipient(ApiModel):
    email: Email | None = None
    phone: Phone | None = None
    device_tokens: list[DeviceToken] | None = Field(default=None, max_length=100)
    webhook_url: WebhookUrl | None = None
    slack: SlackAddress | None = None
    discord: DiscordAddress | None = None
    teams: TeamsAddress | None = None
    telegram: TelegramAddress | None = None
    whatsapp: WhatsAppAddress | None = None


class EmailOptions(ApiModel):
    """Email details of one notification: where a reply goes, who gets a copy."""

    reply_to: Email | None = None
    cc: list[Email] | None = Field(default=None, max_length=MAX_COPIES)
    bcc: list[Email] | None = Field(default=None, max_length=MAX_COPIES)


class NotificationIn(ApiModel):
    type: TypeName
    user_id: UserIdIn | None = None
    to: Recipient | None = None
    data: dict[str, Any] = Field(default_factory=dict)  # NaN, depth: refused in drafts.py
    channels: list[Channel] | None = Field(default=None, min_length=1)
    priority: PriorityIn | None = None
    locale: Locale | None = None
    send_at: SendAt | None = None
    email: EmailOptions | None = None
    cancel_key: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = Field(
        default=None,
        description="a workflow's notification: POST /v1/notifications/cancel with this key "
        "ends its steps not yet run (docs/workflows.md)",
    )


class BatchItemIn(NotificationIn):
    idempotency_key: IdempotencyKey
