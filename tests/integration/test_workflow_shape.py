"""A type's workflow (issue 26, item 5): checked at PUT, a 422 naming the step index and
field; stored and read back as given; a type without one is as before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from tidings.workflows.durations import DurationError, parse_duration
from tidings.workflows.shape import Digest, Send, Unless, Wait, WorkflowProblem, parse_workflow

ESCALATION = [
    {"digest": {"window": "30m", "key": "{{ thread }}", "max": 50}},
    {"send": "email"},
    {"wait": "10m"},
    {"send": "sms", "unless": "email:opened"},
]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("2d", 172_800),
        ("1s", 1),
        ("30d", 2_592_000),
        ("PT10M", 600),
        ("PT1H30M", 5400),
        ("P1DT2H", 93_600),
        ("P2W", 1_209_600),
        ("pt90s", 90),
    ],
)
def test_durations_in_both_spellings(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text",
    ["0s", "30d1s", "P31D", "PT0S", "", "10", "m10", "30m1h", "1h1h", "P1Y", "P1M", "PT", 90, None],
)
def test_durations_refused(text: Any) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


def test_the_issues_example_parses() -> None:
    steps = parse_workflow(ESCALATION, ["email", "sms"])
    assert steps == [
        Digest(window=timedelta(minutes=30), key="{{ thread }}", max=50),
        Send(("email",)),
        Wait(timedelta(minutes=10)),
        Send(("sms",), Unless("email", "opened")),
    ]


@pytest.mark.parametrize(
    ("workflow", "field", "words"),
    [
        ([{"sned": "email"}], "workflow.0", "one of send"),
        ([{"send": "email", "wait": "1m"}], "workflow.0", "one of send"),
        (["email"], "workflow.0", "an object"),
        ([{"send": "fax"}], "workflow.0.send", "not a channel"),
        ([{"send": []}], "workflow.0.send", "channel"),
        ([{"send": "push"}], "workflow.0.send", "not a channel of this type"),
        ([{"send": "email", "retry": 2}], "workflow.0.retry", "unknown field"),
        ([{"send": "sms", "unless": "email:opened"}], "workflow.0.unless", "no earlier step"),
        (
            [{"send": "email"}, {"send": "sms", "unless": "sms:opened"}],
            "workflow.1.unless",
            "no earlier step",
        ),
        (
            [{"send": "email"}, {"send": "sms", "unless": "email:liked"}],
            "workflow.1.unless",
            "one of",
        ),
        ([{"send": "email"}, {"send": "sms", "unless": 3}], "workflow.1.unless", "one of"),
        (
            [{"send": "email"}, {"digest": {"window": "1m"}}],
            "workflow.1.digest",
            "before every send",
        ),
        ([{"send": "email"}, {"wait": "0s"}], "workflow.1.wait", "out of range"),
        ([{"send": "email"}, {"wait": "31d"}], "workflow.1.wait", "out of range"),
        ([{"send": "email"}, {"wait": "soon"}], "workflow.1.wait", "not a duration"),
        ([{"digest": {"key": "{{ a }}"}}, {"send": "email"}], "workflow.0.digest.window", "window"),
        (
            [{"digest": {"window": "1m", "key": "{{ a "}}, {"send": "email"}],
            "workflow.0.digest.key",
            "does not compile",
        ),
        (
            [{"digest": {"window": "1m", "key": "{{ ''.__class__ }}"}}, {"send": "email"}],
            "workflow.0.digest.key",
            "does not compile",
        ),
        (
            [{"digest": {"window": "1m", "key": "{% for x in y %}{{ x }}{% endfor %}"}}],
            "workflow.0.digest.key",
            "no loops",
        ),
        (
            [{"digest": {"window": "1m", "max": 0}}, {"send": "email"}],
            "workflow.0.digest.max",
            "1 to",
        ),
        (
            [{"digest": {"window": "1m", "max": True}}, {"send": "email"}],
            "workflow.0.digest.max",
            "1 to",
        ),
        (
            [{"digest": {"window": "1m", "size": 3}}, {"send": "email"}],
            "workflow.0.digest.size",
            "unknown",
        ),
        (
            [{"digest": {"window": "1m"}}, {"digest": {"window": "2m"}}, {"send": "email"}],
            "workflow.1.digest",
            "at most one digest",
        ),
        ([{"throttle": {"window": "1h"}}, {"send": "email"}], "workflow.0.throttle.limit", "limit"),
        (
            [{"throttle": {"limit": 1, "window": "1h", "key": ""}}, {"send": "email"}],
            "workflow.0.throttle.key",
            "template",
        ),
        ([{"send": "email"}, {"send": ["sms", "email"]}], "workflow.1.send", "sent once"),
        ([{"wait": "1m"}], "workflow", "at least one channel"),
        ([], "workflow", "at least one step"),
    ],
)
def test_problems_name_the_step_and_field(workflow: list[Any], field: str, words: str) -> None:
    with pytest.raises(WorkflowProblem) as raised:
        parse_workflow(workflow, ["email", "sms"])
    assert raised.value.field == field
    assert words in raised.value.message
    assert raised.value.status_code == 422


def _type(workflow: Any) -> dict[str, Any]:
    return {
        "category": "reminder",
        "priority": "normal",
        "channels": ["email", "sms"],
        "workflow": workflow,
    }


async def test_put_stores_and_reads_back_the_workflow(client: httpx.AsyncClient) -> None:
    created = await client.put("/v1/types/comment.new", json=_type(ESCALATION))
    assert created.status_code == 201, created.text
    assert created.json()["workflow"] == ESCALATION
    read = await client.get("/v1/types/comment.new")
    assert read.json()["workflow"] == ESCALATION


async def test_put_refuses_with_the_step_and_field(client: httpx.AsyncClient) -> None:
    bad = [{"send": "email"}, {"wait": "10m"}, {"send": "sms", "unless": "push:opened"}]
    response = await client.put("/v1/types/comment.new", json=_type(bad))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_workflow"
    assert error["field"] == "workflow.2.unless"
    assert (await client.get("/v1/types/comment.new")).status_code == 404


async def test_more_than_twenty_steps_is_refused(client: httpx.AsyncClient) -> None:
    steps = [{"send": "email"}] + [{"wait": "1m"}] * 20
    response = await client.put("/v1/types/comment.new", json=_type(steps))
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "workflow"


async def test_a_type_without_a_workflow_has_none(client: httpx.AsyncClient) -> None:
    body = {"category": "reminder", "priority": "normal", "channels": ["email"]}
    response = await client.put("/v1/types/plain", json=body)
    assert response.status_code == 201
    assert response.json()["workflow"] is None
