"""A workflow's steps as typed values, and their check at ``PUT /v1/types/{name}``: any
problem is a 422 naming the step's index and field (``workflow.2.wait``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tidings.content.render import TEXT, TemplateRejected, compile_part
from tidings.refusal import Refusal
from tidings.workflows.durations import DurationError, parse_duration

MAX_STEPS = 20
MAX_KEY_CHARS = 500  # a key template's source
MAX_DIGEST = 500  # notifications in one digest: its items are one template's scope
MAX_THROTTLE = 10_000
# The events of a delivery's history an ``unless`` may name: read and seen come from the
# in-app inbox, opened and clicked from tracking or the engagement call.
ENGAGEMENT_EVENTS = ("delivered", "opened", "clicked", "read", "seen")
STEP_KINDS = ("send", "wait", "digest", "throttle")


@dataclass(frozen=True)
class Unless:
    channel: str
    event: str


@dataclass(frozen=True)
class Send:
    channels: tuple[str, ...]
    unless: Unless | None = None


@dataclass(frozen=True)
class Wait:
    duration: timedelta


@dataclass(frozen=True)
class Digest:
    window: timedelta
    key: str | None  # a template over the notification's data; None: one per user
    max: int


@dataclass(frozen=True)
class Throttle:
    limit: int
    window: timedelta
    key: str | None


Step = Send | Wait | Digest | Throttle


class WorkflowProblem(Refusal):
    """A workflow refused at PUT: 422, the field ``workflow.<index>.<field>``."""

    def __init__(self, index: int | None, field: str | None, message: str) -> None:
        where = "workflow" if index is None else f"workflow.{index}"
        super().__init__(
            "invalid_workflow",
            message if index is None else f"step {index}: {message}",
            f"{where}.{field}" if field else where,
        )


def parse_workflow(raw: Sequence[Any], channels: Sequence[str]) -> list[Step]:
    """The steps of ``raw`` for a type sending on ``channels``, or ``WorkflowProblem``."""
    if not raw:
        raise WorkflowProblem(None, None, "a workflow has at least one step")
    if len(raw) > MAX_STEPS:
        raise WorkflowProblem(None, None, f"a workflow has at most {MAX_STEPS} steps")
    steps: list[Step] = []
    for index, item in enumerate(raw):
        step = _step(index, item, channels)
        _check_order(index, step, steps)
        steps.append(step)
    if not any(isinstance(step, Send) for step in steps):
        raise WorkflowProblem(None, None, "a workflow sends on at least one channel")
    return steps


def _step(index: int, item: Any, channels: Sequence[str]) -> Step:
    if not isinstance(item, Mapping):
        raise WorkflowProblem(index, None, 'a step is an object such as {"send": "email"}')
    kinds = [name for name in STEP_KINDS if name in item]
    if len(kinds) != 1:
        found = ", ".join(sorted(str(key) for key in item)[:5]) or "nothing"
        raise WorkflowProblem(
            index, None, f"a step is one of {', '.join(STEP_KINDS)}; found {found}"
        )
    kind = kinds[0]
    allowed = {"send", "unless"} if kind == "send" else {kind}
    extra = sorted(str(key) for key in item if key not in allowed)
    if extra:
        raise WorkflowProblem(index, extra[0], f"unknown field {extra[0]!r} in a {kind} step")
    if kind == "send":
        return _send(index, item["send"], item.get("unless"), channels)
    if kind == "wait":
        return Wait(_duration(index, "wait", item["wait"]))
    if kind == "digest":
        return _digest(index, item["digest"])
    return _throttle(index, item["throttle"])


def parse_send(spec: Mapping[str, Any]) -> Send:
    """A stored send step (checked at PUT already)."""
    named = spec["send"]
    channels = [named] if isinstance(named, str) else list(named)
    return _send(0, named, spec.get("unless"), channels)


def parse_throttle(spec: Mapping[str, Any]) -> Throttle:
    """A stored throttle step (checked at PUT already)."""
    return _throttle(0, spec["throttle"])


def parse_digest(spec: Mapping[str, Any]) -> Digest:
    """A stored digest step (checked at PUT already)."""
    return _digest(0, spec["digest"])


def _send(index: int, value: Any, unless: Any, channels: Sequence[str]) -> Send:
    named = [value] if isinstance(value, str) else value
    if not isinstance(named, list) or not named or not all(isinstance(c, str) for c in named):
        raise WorkflowProblem(index, "send", "send names a channel or a list of channels")
    outside = [c for c in named if c not in channels]
    if outside:
        raise WorkflowProblem(
            index,
            "send",
            f"{outside[0][:40]!r} is not a channel of this type ({', '.join(channels)})",
        )
    if len(set(named)) != len(named):
        raise WorkflowProblem(index, "send", "a channel is named twice")
    return Send(tuple(named), None if unless is None else _unless(index, unless))


def _unless(index: int, value: Any) -> Unless:
    channel, _, event = value.partition(":") if isinstance(value, str) else ("", "", "")
    if not channel or event not in ENGAGEMENT_EVENTS:
        raise WorkflowProblem(
            index,
            "unless",
            f'unless is "<channel>:<event>", the event one of {", ".join(ENGAGEMENT_EVENTS)}',
        )
    return Unless(channel, event)


def _digest(index: int, value: Any) -> Digest:
    fields = _object(index, "digest", value, {"window", "key", "max"})
    if "window" not in fields:
        raise WorkflowProblem(index, "digest.window", "a digest needs a window")
    return Digest(
        window=_duration(index, "digest.window", fields["window"]),
        key=_key(index, "digest.key", fields.get("key")),
        max=_count(index, "digest.max", fields.get("max", 100), MAX_DIGEST),
    )


def _throttle(index: int, value: Any) -> Throttle:
    fields = _object(index, "throttle", value, {"limit", "window", "key"})
    for needed in ("limit", "window"):
        if needed not in fields:
            raise WorkflowProblem(index, f"throttle.{needed}", f"a throttle needs a {needed}")
    return Throttle(
        limit=_count(index, "throttle.limit", fields["limit"], MAX_THROTTLE),
        window=_duration(index, "throttle.window", fields["window"]),
        key=_key(index, "throttle.key", fields.get("key")),
    )


def _object(index: int, field: str, value: Any, known: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise WorkflowProblem(index, field, f"{field} is an object")
    extra = sorted(str(key) for key in value if key not in known)
    if extra:
        raise WorkflowProblem(index, f"{field}.{extra[0]}", f"unknown field {extra[0]!r}")
    return value


def _duration(index: int, field: str, value: Any) -> timedelta:
    try:
        return parse_duration(value)
    except DurationError as error:
        raise WorkflowProblem(index, field, f"{field}: {error}") from None


def _count(index: int, field: str, value: Any, most: int) -> int:
    # bool is an int in Python; true is no count.
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise WorkflowProblem(index, field, f"{field} is a whole number from 1 to {most}")
    return value


def _key(index: int, field: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_CHARS:
        raise WorkflowProblem(
            index, field, f"{field} is a template of 1 to {MAX_KEY_CHARS} characters"
        )
    try:
        part = compile_part(field, value)
    except TemplateRejected as error:
        raise WorkflowProblem(index, field, f"the key template does not compile: {error}") from None
    if not part.inline:
        # Rendered at accept, on the event loop: names, attributes, conditions, filters.
        raise WorkflowProblem(
            index, field, "a key template has names, conditions and filters, no loops or calls"
        )
    return value


MAX_KEY_OUTPUT = 255  # a rendered key's characters


class KeyNotRendered(ValueError):
    """A key template that does not render for a notification's data."""


def render_key(source: str, scope: Mapping[str, Any]) -> str:
    """The key for one notification (the template was checked at PUT), or
    ``KeyNotRendered`` saying why."""
    try:
        key = compile_part("key", source).render({**TEXT.globals, **scope})
    except Exception as error:  # StrictUndefined, sandbox, a filter's error
        raise KeyNotRendered(f"{type(error).__name__}: {error}"[:300]) from None
    if len(key) > MAX_KEY_OUTPUT:
        raise KeyNotRendered(f"the key is longer than {MAX_KEY_OUTPUT} characters")
    return key


def _check_order(index: int, step: Step, earlier: Sequence[Step]) -> None:
    sends = [s for s in earlier if isinstance(s, Send)]
    sent = {channel for s in sends for channel in s.channels}
    if isinstance(step, Digest):
        if sends:
            raise WorkflowProblem(index, "digest", "a digest comes before every send")
        if any(isinstance(s, Digest) for s in earlier):
            raise WorkflowProblem(index, "digest", "a workflow has at most one digest")
    if isinstance(step, Send):
        again = [channel for channel in step.channels if channel in sent]
        if again:
            raise WorkflowProblem(
                index, "send", f"{again[0]} is sent by an earlier step; a channel is sent once"
            )
        if step.unless is not None and step.unless.channel not in sent:
            raise WorkflowProblem(
                index,
                "unless",
                f"unless names {step.unless.channel[:40]!r}, which no earlier step sends",
            )
