"""Chat text as each service parses it: whatever the data holds, the escaped text parses
(the simulator's parsers, written apart from the adapters, are the judges) and shows
exactly the words rendered."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.priorities import Channel, Priority
from tidings.providers.base import Content, Message
from tidings.providers.telegram.text import compose
from tidings.simulator.telegram.api import _parsed, text_problem

NASTY = "a_b*c [x](y) ~`>#+-=|{}.! \\ <b>&amp; 1 < 2 & 3 > 0"


def chat(text: str, subject: str | None = None, html: str | None = None) -> Message:
    return Message(
        delivery_id=uuid.uuid4(),
        notification_id=uuid.uuid4(),
        channel=Channel.TELEGRAM,
        address="421337001",
        type="note",
        priority=Priority.NORMAL,
        content=Content(subject=subject, text=text, html=html),
    )


@pytest.mark.parametrize("mode", ["HTML", "MarkdownV2"])
def test_reserved_characters_are_escaped_and_shown_as_written(mode: str) -> None:
    text, parse_mode = compose(chat(NASTY, subject=NASTY), mode)
    assert parse_mode == mode
    assert text_problem(text, parse_mode) is None
    assert _parsed(text, parse_mode) == f"{NASTY}\n{NASTY}"


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=200).filter(str.strip), st.sampled_from(["HTML", "MarkdownV2"]))
def test_any_text_parses_in_either_mode(words: str, mode: str) -> None:
    text, parse_mode = compose(chat(words), mode)
    assert text_problem(text, parse_mode) is None, text
    assert _parsed(text, parse_mode) == words.strip()


def test_an_unescaped_text_is_refused_as_telegram_would() -> None:
    """The judges are strict: the same words unescaped do not parse."""
    assert "can't parse entities" in (text_problem("1 < 2 & 3", "HTML") or "")
    assert "can't parse entities" in (text_problem("version 1.2", "MarkdownV2") or "")
    assert "can't parse entities" in (text_problem("<div>x</div>", "HTML") or "")


def test_an_html_part_is_sent_as_html_with_the_subject_bold() -> None:
    text, parse_mode = compose(chat("", subject="A & B", html="<i>x</i> &lt;y&gt;"), "none")
    assert (text, parse_mode) == ("<b>A &amp; B</b>\n<i>x</i> &lt;y&gt;", "HTML")
    assert text_problem(text, parse_mode) is None
