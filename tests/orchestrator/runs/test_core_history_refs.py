"""Each tool output stored once: the history's references to a step's results, the
result events' references to a call's result, and the worker's history cache (pure)."""

from __future__ import annotations

import json

import pytest

from agentq.orchestrator.core.events import OUTPUT_REF, event_json, parse_event, with_output
from agentq.orchestrator.core.messages import (
    MESSAGE_ADAPTER,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.loop.prepare import messages_digest
from agentq.orchestrator.runs.state import BeginStep, BeginStepReply, Outcome, StepField, call_field
from agentq.orchestrator.runs.state.history import (
    referenced_step,
    resolve_messages,
    tool_message,
    tool_message_frame,
    tool_results_ref,
)
from agentq.orchestrator.runs.transitions import result_events
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.steps.history_cache import History, HistoryCache, asking, completed

pytestmark = pytest.mark.unit


def _step(*results: ToolResultPart) -> dict[str, str]:
    fields = {StepField.ORDER.value: json.dumps([r.tool_call_id for r in results])}
    for r in results:
        fields[call_field(StepField.RESULT, r.tool_call_id)] = r.model_dump_json()
    return fields


def _part(call_id: str, output: object) -> ToolResultPart:
    return ToolResultPart(tool_call_id=call_id, tool_name="t", output=output)


def test_a_reference_names_its_step_and_no_message_is_a_reference() -> None:
    assert referenced_step(tool_results_ref(12)) == 12
    assert tool_results_ref(3, '["a"]') == '@tool-results:3["a"]'
    assert referenced_step(tool_results_ref(3, '["a"]')) == 3
    assert tool_results_ref(3, json.dumps(["x" * 300])) == "@tool-results:3"  # too long
    assert referenced_step(UserMessage(content="@tool-results:1").model_dump_json()) is None


def test_a_resolved_reference_is_the_tool_message_the_join_used_to_write() -> None:
    parts = [_part("c2", {"a": [1, 2]}), _part("c1", "x" * 100)]
    open_, close = tool_message_frame()
    # What the join appended before references: the results in call order, in the frame.
    inline = open_ + ",".join(p.model_dump_json() for p in parts) + close
    assert tool_message(_step(*parts)) == inline
    message = MESSAGE_ADAPTER.validate_json(inline)
    assert isinstance(message, ToolMessage)
    assert [p.tool_call_id for p in message.content] == ["c2", "c1"]


def test_resolving_a_history_keeps_stored_messages_and_inline_tool_messages() -> None:
    user = UserMessage(content="go").model_dump_json()
    old_inline = tool_message(_step(_part("c0", 1)))  # written before references
    steps = [_step(_part("c0", 1)), {}, _step(_part("c9", "late"))]
    entries = [user, old_inline, tool_results_ref(0), tool_results_ref(2)]
    assert resolve_messages(entries, steps) == [
        user,
        old_inline,
        old_inline,
        tool_message(steps[2]),
    ]
    with pytest.raises(LookupError):
        resolve_messages([tool_results_ref(1)], steps)


@pytest.mark.parametrize(
    "part",
    [
        _part("c1", {"k": "v", "n": [1, 2.5]}),
        _part("c1", "text"),
        ToolResultPart(tool_call_id="c1", tool_name="t", output="boom", is_error=True),
        _part("c1", None),
    ],
)
def test_a_stored_result_event_reads_as_the_event_it_was(part: ToolResultPart) -> None:
    (whole,) = result_events("r", 3, part, stored=False)
    (stored,) = result_events("r", 3, part)
    body = json.loads(stored)
    if part.output is not None:
        assert OUTPUT_REF in body
        assert "output" not in body
        assert "error" not in body
    resolved = with_output(body, json.loads(part.model_dump_json())["output"])
    expected = json.loads(whole)
    expected["at"] = body["at"]  # each event_json stamps its own time
    # Field order too: what a reader serializes (SSE, the CLI) is unchanged.
    assert list(resolved.items()) == list(expected.items())
    assert parse_event(7, resolved).model_dump_json() == parse_event(7, expected).model_dump_json()


def test_an_event_without_a_reference_is_read_as_stored() -> None:
    raw = event_json("tool-progress", "r", step=0, output={"p": 1})
    assert with_output(json.loads(raw), "ignored") == json.loads(raw)


# -- the worker's history cache -----------------------------------------------------------


def _msgs(*texts: str) -> list[str]:
    return [UserMessage(content=t).model_dump_json() for t in texts]


SPEC = RunSpec.model_validate({"model": {"provider": "scripted", "script": []}, "prompt": "go"})


def _reply(start: int, messages: list[str], stamp: str = "s1") -> BeginStepReply:
    """begin_step's reply: the spec only with the whole history (start 0)."""
    spec = SPEC.model_dump_json(exclude_none=True) if start == 0 else ""
    return BeginStepReply(
        outcome=Outcome.OK, spec=spec, messages=messages, start=start, stamp=stamp
    )


def _begin() -> BeginStep:
    return BeginStep(run_id="r", step=1, event="{}")


def test_a_cold_worker_asks_for_everything_and_a_warm_one_for_what_it_lacks() -> None:
    assert asking(None, _begin()).known == 0
    held = completed(None, _reply(0, _msgs("a", "b")))
    ask = asking(held, _begin())
    assert (ask.known, ask.known_stamp) == (2, "s1")
    whole = completed(held, _reply(2, _msgs("c")))
    assert [m.content for m in whole.messages] == ["a", "b", "c"]
    assert whole.spec == SPEC  # held: a warm step's reply leaves it out
    assert whole.size == held.size + len(_msgs("c")[0])


def test_the_held_historys_digest_is_the_digest_of_its_messages() -> None:
    held = completed(None, _reply(0, _msgs("a", "b")))
    assert held.digest == messages_digest(held.messages)
    grown = completed(held, _reply(2, _msgs("c", "d")))
    assert grown.digest == messages_digest(grown.messages)
    assert held.digest == messages_digest(held.messages)  # the held one is left as it was


def test_a_redelivered_step_does_not_append_twice() -> None:
    held = completed(None, _reply(0, _msgs("a", "b")))
    again = completed(held, _reply(2, []))  # nothing was appended since
    assert again.messages == held.messages


def test_a_store_that_would_not_build_on_the_held_history_replaces_it() -> None:
    held = completed(None, _reply(0, _msgs("a", "b")))
    fresh = completed(held, _reply(0, _msgs("x"), stamp="s2"))  # another run of the id
    assert [m.content for m in fresh.messages] == ["x"]
    with pytest.raises(RuntimeError):
        completed(held, _reply(1, _msgs("c")))  # never: the store answers after `known`
    with pytest.raises(RuntimeError):
        completed(held, _reply(2, _msgs("c"), stamp="s2"))


def _history(size: int) -> History:
    return History(stamp="s", spec=SPEC, tools=(), messages=(), size=size)


def test_the_cache_is_bounded_in_bytes_least_recently_used_first() -> None:
    cache = HistoryCache(max_bytes=100)
    cache.put("a", _history(40))
    cache.put("b", _history(40))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("c", _history(40))
    assert cache.get("b") is None
    assert cache.get("a") is not None
    assert cache.get("c") is not None
    assert cache.size == 80
    cache.put("a", _history(50))  # replaced, not added
    assert cache.size == 90
    assert len(cache) == 2
    cache.put("huge", _history(101))
    assert cache.get("huge") is None
    assert cache.size == 90
    cache.drop("a")
    assert cache.size == 40


def test_a_cache_of_no_bytes_keeps_nothing() -> None:
    cache = HistoryCache(max_bytes=0)
    cache.put("a", _history(1))
    assert cache.get("a") is None
    assert len(cache) == 0
