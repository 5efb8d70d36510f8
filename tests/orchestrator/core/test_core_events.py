"""Typed events: each type's stored form reads as its model and goes out on the wire as it
was stored; every type and field the emitters (Python and Lua) write has its model."""

from __future__ import annotations

import ast
import json
import re
from typing import Any, get_args

import pytest

from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core.events import EVENT_MODELS, EventType, event_json, parse_event
from agentq.workers.worker.webhooks import webhook_body
from tests.support.infra import REPO

pytestmark = pytest.mark.unit

ROOT = REPO
USAGE = {
    "input_tokens": 12,
    "output_tokens": 3,
    "total_tokens": 15,
    "cached_input_tokens": 0,
    "cache_write_tokens": 0,
    "reasoning_tokens": 0,
}


def _lua(type_: str, **fields: Any) -> str:
    """An event as `finish_run` (Lua, cjson) writes it."""
    return json.dumps({"type": type_, "run_id": "r", "at": 1.25, **fields})


# One stored form per type, with the fields its emitters write, in the order they write them.
STORED: dict[str, str] = {
    "start": event_json("start", "r", model="openai:gpt", metadata={"k": "v"}),
    "start-step": event_json("start-step", "r", step=0, attempt=1),
    "step-held": event_json(
        "step-held", "r", step=0, budget="batch:t:b", message="budget reached: batch 'b'"
    ),
    "model-retry": event_json(
        "model-retry", "r", step=0, reason="429", delay_s=0.5, attempt=2, max_attempts=4
    ),
    "text-delta": event_json("text-delta", "r", step=0, attempt=1, delta="Hé"),
    "reasoning-delta": event_json("reasoning-delta", "r", step=0, attempt=1, delta="hm"),
    "tool-input-start": event_json(
        "tool-input-start", "r", step=0, attempt=1, tool_call_id="c", tool_name="add"
    ),
    "tool-input-delta": event_json(
        "tool-input-delta", "r", step=0, attempt=1, tool_call_id="c", delta='{"a":'
    ),
    "tool-call": event_json(
        "tool-call", "r", step=0, tool_call_id="c", tool_name="add", input={"a": 1}
    ),
    "tool-call-repair": event_json(
        "tool-call-repair",
        "r",
        step=0,
        tool_call_id="c",
        tool_name="add",
        input={"a": "x"},
        error="a: not an integer",
        repaired=True,
        repaired_input={"a": 1},
        attempts=1,
    ),
    "tool-approval-request": event_json(
        "tool-approval-request", "r", step=0, tool_call_id="c", tool_name="rm", input={}
    ),
    "tool-approval-response": event_json(
        "tool-approval-response",
        "r",
        step=0,
        tool_call_id="c",
        tool_name="rm",
        approved=False,
        reason="no",
    ),
    "tool-input-request": event_json(
        "tool-input-request",
        "r",
        step=0,
        tool_call_id="c",
        tool_name="ask",
        request_id="c.1",
        message="Your name?",
        input={"type": "object"},
    ),
    "tool-input-response": event_json(
        "tool-input-response",
        "r",
        step=0,
        tool_call_id="c",
        request_id="c.1",
        outcome="accept",
        output={"name": "Ada"},
    ),
    "tool-running": event_json("tool-running", "r", step=0, tool_call_id="c", attempt=1),
    "tool-progress": event_json(
        "tool-progress", "r", step=0, tool_call_id="c", tool_name="count", output={"n": 1}
    ),
    "tool-log": event_json(
        "tool-log", "c", tool_call_id="c", tool_name="t", level="info", data="hi", logger="srv"
    ),
    "tool-result": event_json(
        "tool-result", "r", step=0, tool_call_id="c", tool_name="add", output=3
    ),
    "tool-error": event_json(
        "tool-error", "r", step=0, tool_call_id="c", tool_name="add", error="boom"
    ),
    "guardrail-tripped": event_json(
        "guardrail-tripped",
        "r",
        step=0,
        tool_call_id="c",
        tool_name="add",
        stage="tool_input",
        guardrail="no_deletes",
        reason="deletes are not allowed",
    ),
    "finish-step": event_json(
        "finish-step", "r", step=0, finish_reason="stop", usage=USAGE, text="3"
    ),
    "context-compacted": event_json(
        "context-compacted",
        "r",
        step=2,
        strategy="drop-oldest",
        before_tokens=900,
        after_tokens=300,
        before_messages=12,
        after_messages=4,
    ),
    "finish": _lua("finish", status="succeeded", usage=USAGE, text="3", finish_reason="stop"),
    "error": _lua(
        "error",
        status="failed",
        usage=USAGE,
        error={"type": "provider", "message": "down", "step": 0, "status": None},
    ),
    "abort": _lua("abort", status="cancelled", usage=USAGE, reason="enough"),
    "webhook-failed": event_json(
        "webhook-failed",
        "r",
        url="https://hooks.example/x",
        event_seq=9,
        event_type="finish",
        attempts=3,
        error="HTTP 500",
    ),
}


def test_every_event_type_has_a_model_and_a_stored_form_here() -> None:
    assert set(EVENT_MODELS) == set(get_args(EventType))
    assert set(STORED) == set(EVENT_MODELS)


@pytest.mark.parametrize("type_", sorted(STORED))
def test_a_stored_event_reads_as_its_model_and_goes_out_as_it_was_stored(type_: str) -> None:
    stored = STORED[type_]
    event = parse_event(41, stored.encode())
    assert type(event) is EVENT_MODELS[type_]
    assert event.seq == 41
    # The wire form: the stored fields, seq first, nothing added, in the emitter's order.
    wire = json.loads(ev.wire_json(event))
    assert list(wire.items()) == list({"seq": 41, **json.loads(stored)}.items())
    # What a webhook receives: as before, step / tool_call_id / tool_name on every event.
    body = json.loads(webhook_body(event))
    common = {"seq": 41, "type": type_, "run_id": wire["run_id"], "at": wire["at"]}
    common |= {k: wire.get(k) for k in ("step", "tool_call_id", "tool_name")}
    assert body == {**common, **wire}
    assert list(body)[:7] == list(common)


def test_the_sequence_is_the_stream_entry_s_not_the_body_s() -> None:
    body = {**json.loads(STORED["start-step"]), "seq": 3}
    assert parse_event(8, body).seq == 8


def test_a_null_the_lua_wrote_is_left_off_the_wire_and_kept_for_webhooks() -> None:
    event = parse_event(5, _lua("abort", status="cancelled", usage=USAGE, reason=None))
    assert "reason" not in json.loads(ev.wire_json(event))
    assert json.loads(webhook_body(event))["reason"] is None


def test_an_unknown_field_or_type_is_refused() -> None:
    with pytest.raises(ValueError, match="extra"):
        parse_event(1, event_json("start-step", "r", step=0, attempt=1, surprise=1))
    with pytest.raises(ValueError, match="tag"):
        parse_event(1, json.dumps({"type": "nope", "run_id": "r", "at": 0.0}))


def test_the_terminal_types_are_the_run_s_ends() -> None:
    assert {"finish", "error", "abort"} == ev.TERMINAL_EVENTS
    assert all(isinstance(parse_event(1, STORED[t]), ev.TERMINAL) for t in ev.TERMINAL_EVENTS)


# -- the emitters -------------------------------------------------------------------


def _fields(type_: str) -> set[str]:
    return set(EVENT_MODELS[type_].model_fields)


def _lua_sources() -> dict[str, str]:
    found = {str(p.relative_to(ROOT)): p.read_text() for p in ROOT.glob("orchestrator/**/*.lua")}
    assert found, "no Lua scripts found"
    return found


FINISH_RUN_CALL = re.compile(r"finish_run\(\s*[\w.]+\s*,\s*'([\w-]+)'\s*,\s*\{([^}]*)\}")
FINISH_RUN_BODY = re.compile(r"local ev = \{type = ev_type,([^}]*)\}", re.S)
TABLE_KEY = re.compile(r"(\w+)\s*=")


def test_every_type_and_field_the_lua_scripts_emit_has_its_model() -> None:
    sources = _lua_sources()
    calls = [(m[1], m[2]) for text in sources.values() for m in FINISH_RUN_CALL.finditer(text)]
    assert {t for t, _ in calls} == {"finish", "error", "abort"}
    (common,) = [m[1] for text in sources.values() for m in FINISH_RUN_BODY.finditer(text)]
    for type_, table in calls:
        assert type_ in EVENT_MODELS, type_
        written = set(TABLE_KEY.findall(table)) | set(TABLE_KEY.findall(common))
        assert written <= _fields(type_), (type_, written - _fields(type_))
    # A run's claim adds the tool's name to the `tool-running` event it was given.
    added = {f for text in sources.values() for f in re.findall(r"\bev\.(\w+)\s*=", text)}
    assert added <= _fields("tool-running"), added


def _event_json_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    # agentq/ links the other two: each file once, by its real path.
    paths = {
        p.resolve() for f in ("orchestrator", "workers", "agentq") for p in (ROOT / f).rglob("*.py")
    }
    for path in sorted(paths):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            builds = isinstance(node.func, ast.Name) and node.func.id == "event_json"
            # A call's home emits for the tool that runs it: `home.emit("tool-log", ...)`.
            emits = (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "emit"
                and bool(node.args)
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            )
            if builds or emits:
                calls.append((str(path.relative_to(ROOT)), node))
    return calls


def test_every_type_and_field_the_python_emitters_write_has_its_model() -> None:
    calls = _event_json_calls()
    assert len(calls) > 20, len(calls)
    literal_types = set()
    for where, call in calls:
        written = {k.arg for k in call.keywords if k.arg is not None} - {"run_id"}
        kind = call.args[0]
        if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
            literal_types.add(kind.value)
            assert kind.value in EVENT_MODELS, (where, kind.value)
            missing = written - _fields(kind.value)
            assert not missing, (where, kind.value, missing)
        else:  # a type chosen at run time (text or reasoning deltas): some model has them
            assert any(written <= f for f in map(_fields, EVENT_MODELS)), (where, written)
    # Only the terminal ones come from Lua; the deltas' types are chosen at run time.
    assert literal_types | {"finish", "error", "abort", "text-delta", "reasoning-delta"} == set(
        EVENT_MODELS
    )


def _strict(raw: str) -> Any:
    """JSON as a browser's JSON.parse reads it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(raw, parse_constant=refuse)


def test_an_event_is_strict_json_whatever_a_tool_returned() -> None:
    stored = event_json(
        "tool-result",
        "r",
        step=0,
        tool_call_id="c",
        tool_name="t",
        output={"ratio": float("nan"), "max": float("inf"), 7: "a key that was a number"},
    )
    assert _strict(stored)["output"] == {"ratio": None, "max": None, "7": "a key that was a number"}


def test_an_integer_past_64_bits_in_a_tool_s_input_is_kept() -> None:
    stored = event_json(
        "tool-call", "r", step=0, tool_call_id="c", tool_name="t", input={"n": 2**70}
    )
    assert json.loads(stored)["input"] == {"n": 2**70}
