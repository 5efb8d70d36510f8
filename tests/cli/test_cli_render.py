"""What `agentq run` prints: escaped, unwrapped, one copy of the text, every event kind."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console

from agentq.cli.render import ProgressPrinter
from agentq.orchestrator.core.events import Event, parse_event

pytestmark = pytest.mark.unit


def printer(color: bool = False) -> tuple[ProgressPrinter, io.StringIO]:
    out = io.StringIO()
    console = Console(
        file=out,
        width=80,
        force_terminal=color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
        soft_wrap=True,
    )
    return ProgressPrinter(console), out


def event(seq: int, type_: str, **fields: Any) -> Event:
    return parse_event(seq, {"type": type_, "run_id": "r1", "at": 0.0, **fields})


def test_user_text_is_never_markup_or_emoji() -> None:
    show, out = printer()
    show.show(event(1, "start", model="openai::x:"))
    show.show(event(2, "text-delta", step=0, delta="[bold]not bold[/] :x: "))
    show.show(event(3, "tool-call", step=0, tool_call_id="c[1]", tool_name="[red]t", input={}))
    text = out.getvalue()
    assert "openai::x:" in text
    assert "[bold]not bold[/] :x:" in text
    assert "[red]t#c[1]" in text
    assert "❌" not in text


def test_long_lines_are_not_wrapped_when_piped() -> None:
    show, out = printer()
    long = "word " * 60
    show.show(event(1, "text-delta", step=0, delta=long))
    show.show(event(2, "tool-result", step=0, tool_call_id="c", tool_name="t", output="x" * 150))
    lines = out.getvalue().splitlines()
    assert lines[0] == long
    assert any(len(line) > 150 for line in lines[1:])


def test_model_text_keeps_the_terminal_colour() -> None:
    show, out = printer(color=True)
    show.show(event(1, "text-delta", step=0, delta="plain words"))
    assert "\x1b[" not in out.getvalue().split("plain words")[0][-10:]
    assert "\x1b[37m" not in out.getvalue()  # never forced white


def test_a_retried_step_shows_its_text_once() -> None:
    show, out = printer()
    show.show(event(1, "start-step", step=0, attempt=1))
    show.show(event(2, "text-delta", step=0, attempt=1, delta="Hello "))
    show.show(event(3, "start-step", step=0, attempt=2))
    show.show(event(4, "text-delta", step=0, attempt=2, delta="Hello world"))
    show.show(event(5, "text-delta", step=0, attempt=1, delta="late "))  # a stale flush
    text = out.getvalue()
    assert "late" not in text
    assert "attempt 2" in text
    assert "discarded" in text
    assert text.count("Hello world") == 1


def test_every_waiting_and_retry_event_is_shown() -> None:
    show, out = printer()
    show.show(event(1, "model-retry", step=0, reason="429", delay_s=1.0, attempt=2, max_attempts=4))
    show.show(
        event(
            2,
            "tool-input-request",
            step=0,
            tool_call_id="c1",
            tool_name="ask",
            request_id="c1.1",
            message="Your name?",
        )
    )
    show.show(event(3, "tool-running", step=0, tool_call_id="c1", tool_name="ask", attempt=2))
    show.show(
        event(
            4,
            "tool-call-repair",
            step=0,
            tool_call_id="c2",
            tool_name="add",
            error="a: required",
            repaired=True,
            attempts=1,
        )
    )
    show.show(event(5, "tool-approval-request", step=0, tool_call_id="c3", tool_name="rm"))
    show.show(
        event(6, "tool-input-response", step=0, tool_call_id="c1", request_id="c1.1", outcome="ok")
    )
    text = out.getvalue()
    assert "retrying after 429 in 1.0 s (attempt 2/4)" in text
    assert "ask#c1 asks: Your name? (request c1.1)" in text
    assert "running again (attempt 2)" in text
    assert "add#c2 had invalid input (a: required): repaired" in text
    assert "rm#c3 waits for approval" in text
    # the response names only the call: the tool's name is the one its request named
    assert "ask#c1 ok" in text
    assert "None" not in text
    json.dumps(text)


def test_reasoning_shows_dimmed_on_its_own_line() -> None:
    show, out = printer(color=True)
    show.show(event(1, "reasoning-delta", step=0, attempt=1, delta="thinking "))
    show.show(event(2, "reasoning-delta", step=0, attempt=1, delta="[b]hard[/b]"))
    show.show(event(3, "text-delta", step=0, attempt=1, delta="answer"))
    text = out.getvalue()
    dim = "\x1b[2m"
    assert dim + "thinking " in text
    assert dim + "[b]hard[/b]" in text  # escaped like any model text
    reasoning_line, answer_line = text.split("\n")[:2]
    assert "hard" in reasoning_line
    assert answer_line == "answer"  # the answer: not dimmed, on its own line


def test_a_stale_attempts_reasoning_is_dropped() -> None:
    show, out = printer()
    show.show(event(1, "start-step", step=0, attempt=2))
    show.show(event(2, "reasoning-delta", step=0, attempt=1, delta="stale"))
    show.show(event(3, "reasoning-delta", step=0, attempt=2, delta="fresh"))
    assert "stale" not in out.getvalue()
    assert "fresh" in out.getvalue()


def test_a_tool_error_shows_its_kind() -> None:
    show, out = printer()
    show.show(event(1, "tool-error", step=0, tool_call_id="c1", tool_name="t", error="slow"))
    show.show(
        event(2, "tool-error", step=0, tool_call_id="c2", tool_name="t", error="x", kind="timeout")
    )
    assert out.getvalue().splitlines() == ["  ✗ t#c1 slow", "  ✗ t#c2 (timeout) x"]
