"""Guardrails through the embedded runtime and the scripted provider: an input guard
trips before the model is asked, an output guard on the final answer, guards that pass,
and names no live worker registered refused at submit."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from agentq import GuardCheck, guardrail
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.messages import Message, UserMessage
from agentq.workers.steps import hooks as step_hooks
from agentq.workers.tools.function_tools import FunctionTool, tool
from tests.support.embedded_runs import (
    TIMEOUT_S,
    Embedded,
    ModelLog,
    all_events,
    of_type,
    wait_event,
)
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[[Sequence[FunctionTool]], Embedded]


@tool
def search(q: str) -> str:
    """Search for q."""
    return f"found {q}"


@pytest.fixture
def checks() -> Iterator[list[GuardCheck]]:
    """Registers the test's guards for the test only; records what they were asked."""
    asked: list[GuardCheck] = []

    def no_secrets(check: GuardCheck) -> str | None:
        asked.append(check)
        messages: list[Message] = check.value
        said = " ".join(str(m.content) for m in messages if isinstance(m, UserMessage))
        return "the input carries an API key" if "sk-" in said else None

    async def no_refunds(check: GuardCheck) -> str | None:
        asked.append(check)
        return "promises a refund" if "refund" in str(check.value) else None

    def broken_guard(check: GuardCheck) -> str | None:
        raise ValueError("cannot judge")

    before = dict(step_hooks._RULE_HOOKS)
    guardrail(no_secrets)
    guardrail(name="no_refunds")(no_refunds)
    guardrail(broken_guard)
    yield asked
    step_hooks._RULE_HOOKS.clear()
    step_hooks._RULE_HOOKS.update(before)


GUARDS = {"input": ["no_secrets"], "output": ["no_refunds"]}


def guarded(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return scripted(*steps, tools=["search"], guardrails=GUARDS, **extra)


async def test_an_input_guard_trips_before_the_model_is_asked(
    start: Start, model_log: ModelLog, checks: list[GuardCheck]
) -> None:
    spec = guarded({"text": "hello"}, prompt="my key is sk-123")
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.step) == ("guardrail-tripped", 0)
    assert result.error.message == (
        "input guardrail 'no_secrets' tripped: the input carries an API key"
    )
    assert model_log.calls == []
    (error,) = [e.model_dump() for e in events if e.type == "error"]
    assert error["error"]["type"] == "guardrail-tripped"
    assert [c.stage for c in checks] == ["input"]


async def test_an_output_guard_trips_on_the_final_answer(
    start: Start, checks: list[GuardCheck]
) -> None:
    spec = guarded(calls(("search", {"q": "order"})), {"text": "you get a refund"})
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.step) == ("guardrail-tripped", 1)
    assert result.error.message == "output guardrail 'no_refunds' tripped: promises a refund"
    # Asked once, about the answer that would have ended the run (not step 0's calls).
    assert [(c.stage, c.value) for c in checks if c.stage == "output"] == [
        ("output", "you get a refund")
    ]


async def test_the_answer_an_output_guard_trips_on_was_streamed_before_the_error(
    start: Start, checks: list[GuardCheck]
) -> None:
    # The step's last deltas ride in its commit; a step that fails instead writes them
    # first, so the stream still shows what the model said, then why the run ended.
    spec = guarded({"text": "you get a refund"})
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
    assert result.status == "failed"
    types = [e.type for e in events]
    said = "".join(getattr(e, "delta", "") for e in events if e.type == "text-delta")
    assert said == "you get a refund"
    assert types.index("text-delta") < types.index("error")


async def test_guards_that_pass_let_the_run_finish(start: Start, checks: list[GuardCheck]) -> None:
    spec = guarded(calls(("search", {"q": "order"})), {"text": "shipped"})
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.succeeded, result.error
    assert result.text == "shipped"
    (asked_input, asked_output) = checks
    assert asked_input.stage == "input"
    assert asked_input.value == [UserMessage(content="go")]
    assert (asked_output.stage, asked_output.value) == ("output", "shipped")


async def test_an_output_guard_sees_the_structured_output(
    start: Start, checks: list[GuardCheck]
) -> None:
    schema = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
    spec = guarded(
        {"text": '{"note": "full refund"}'}, output={"schema": schema, "mode": "prompted"}
    )
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind == "guardrail-tripped"
    assert checks[-1].value == {"note": "full refund"}


async def test_a_guard_that_raises_fails_the_run_naming_it(
    start: Start, checks: list[GuardCheck]
) -> None:
    spec = scripted({"text": "hi"}, guardrails={"output": ["broken_guard"]})
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.step) == ("hook", 0)
    assert result.error.message == "guardrail hook 'broken_guard' raised ValueError: cannot judge"


async def test_a_guard_no_live_worker_registered_is_refused_at_submit(
    start: Start, checks: list[GuardCheck]
) -> None:
    async with start([search]) as client:
        with pytest.raises(SpecError, match="guardrails: 'missing' is not a guardrail"):
            await client.runs.submit(scripted({"text": "x"}, guardrails={"input": ["missing"]}))


# -- tool guards: a trip is a tool error the model sees --------------------------------


@pytest.fixture
def tool_checks() -> Iterator[list[GuardCheck]]:
    """Tool guards for the test only: no deleting anything, no leaking a password."""
    asked: list[GuardCheck] = []

    def no_deletes(check: GuardCheck) -> str | None:
        asked.append(check)
        return "deletes are not allowed" if "delete" in str(check.value) else None

    def no_passwords(check: GuardCheck) -> str | None:
        asked.append(check)
        return "the output shows a password" if "password" in str(check.value) else None

    before = dict(step_hooks._RULE_HOOKS)
    guardrail(no_deletes)
    guardrail(no_passwords)
    yield asked
    step_hooks._RULE_HOOKS.clear()
    step_hooks._RULE_HOOKS.update(before)


RAN: list[str] = []


@tool
def shell(cmd: str) -> str:
    """Run cmd."""
    RAN.append(cmd)
    return f"ran {cmd}; password=hunter2" if cmd == "cat secrets" else f"ran {cmd}"


TOOL_GUARDS = {"tool_input": ["no_deletes"], "tool_output": ["no_passwords"]}


async def test_tool_guards_turn_a_trip_into_a_tool_error(
    start: Start, tool_checks: list[GuardCheck]
) -> None:
    RAN.clear()
    spec = scripted(
        calls(("shell", {"cmd": "ls"}), ("shell", {"cmd": "delete all"})),
        calls(("shell", {"cmd": "cat secrets"})),
        {"text": "done"},
        tools=["shell"],
        guardrails=TOOL_GUARDS,
    )
    async with start([shell]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
    assert result.succeeded, result.error
    # The tripped input was never run; the tripped output never reached the model.
    assert RAN == ["ls", "cat secrets"]
    assert [
        [(r.output, r.is_error, r.error_kind) for r in s.tool_results] for s in result.steps[:2]
    ] == [
        [
            ("ran ls", False, None),
            ("tool_input guardrail 'no_deletes' tripped: deletes are not allowed", True, "denied"),
        ],
        [
            (
                "tool_output guardrail 'no_passwords' tripped: the output shows a password",
                True,
                "denied",
            )
        ],
    ]
    trips = [e.model_dump(exclude={"seq", "at", "run_id"}) for e in events]
    trips = [e for e in trips if e["type"] == "guardrail-tripped"]
    assert trips == [
        {
            "type": "guardrail-tripped",
            "step": 0,
            "tool_call_id": result.steps[0].tool_calls[1].id,
            "tool_name": "shell",
            "stage": "tool_input",
            "guardrail": "no_deletes",
            "reason": "deletes are not allowed",
        },
        {
            "type": "guardrail-tripped",
            "step": 1,
            "tool_call_id": result.steps[1].tool_calls[0].id,
            "tool_name": "shell",
            "stage": "tool_output",
            "guardrail": "no_passwords",
            "reason": "the output shows a password",
        },
    ]
    assert {(c.stage, c.tool_name) for c in tool_checks} == {
        ("tool_input", "shell"),
        ("tool_output", "shell"),
    }


@pytest.mark.parametrize("cmd", ["delete all", "cat secrets"], ids=["tool_input", "tool_output"])
async def test_a_trip_on_a_fail_run_tool_ends_the_run(
    start: Start, tool_checks: list[GuardCheck], cmd: str
) -> None:
    spec = scripted(
        calls(("shell", {"cmd": cmd})),
        {"text": "never asked"},
        tools=[{"type": "function", "name": "shell", "on_error": "fail-run"}],
        guardrails=TOOL_GUARDS,
    )
    async with start([shell]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.tool, result.error.error_kind) == (
        "tool",
        "shell",
        "denied",
    )


async def test_a_tool_input_trip_is_replayed_from_the_step(
    start: Start, tool_checks: list[GuardCheck]
) -> None:
    """Which calls tripped is stored with the step: a replay, which calls no guard, plans
    the same tool errors."""
    spec = scripted(
        calls(("shell", {"cmd": "delete all"})),
        {"text": "done"},
        tools=["shell"],
        guardrails=TOOL_GUARDS,
    )
    async with start([shell]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        replayed = await client.runs.replay(run_id)
    assert result.succeeded, result.error
    assert replayed.divergences == []


def _denied(result: Any) -> list[tuple[Any, bool, Any]]:
    return [(r.output, r.is_error, r.error_kind) for r in result.steps[0].tool_results]


TRIPPED = "tool_output guardrail 'no_passwords' tripped: the output shows a password"


async def _trips(client: Any, run_id: str) -> list[tuple[str, str, str]]:
    events = await all_events(client, run_id)
    return [(e.stage, e.guardrail, e.tool_name) for e in events if e.type == "guardrail-tripped"]


async def test_a_client_tool_s_posted_result_is_guarded(
    start: Start, tool_checks: list[GuardCheck]
) -> None:
    """A result posted from outside (here the Python API; the CLI and HTTP post through
    it) passes the run's tool_output guards as a worker's tool result does."""
    spec = scripted(
        calls(("ask_user", {"q": "the password?"})),
        {"text": "done"},
        tools=[{"type": "client", "name": "ask_user"}],
        guardrails=TOOL_GUARDS,
    )
    async with start([]) as client:
        run_id = await client.runs.submit(spec)
        call = await wait_event(client, run_id, of_type("tool-call"))
        await client.runs.submit_tool_result(
            run_id, call.model_dump()["tool_call_id"], "password=hunter2"
        )
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        trips = await _trips(client, run_id)
    assert result.succeeded, result.error
    assert _denied(result) == [(TRIPPED, True, "denied")]
    assert trips == [("tool_output", "no_passwords", "ask_user")]


async def test_a_child_run_s_answer_is_guarded(start: Start, tool_checks: list[GuardCheck]) -> None:
    child = {
        "model": {"provider": "scripted", "script": [{"text": "the password is hunter2"}]},
    }
    spec = scripted(
        calls(("helper", {"prompt": "find the password"})),
        {"text": "done"},
        tools=[{"type": "agent", "name": "helper", "spec": child}],
        guardrails=TOOL_GUARDS,
    )
    async with start([]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        trips = await _trips(client, run_id)
    assert result.succeeded, result.error
    assert _denied(result) == [(TRIPPED, True, "denied")]
    assert trips == [("tool_output", "no_passwords", "helper")]
    assert [(c.stage, c.value) for c in tool_checks if c.stage == "tool_output"] == [
        ("tool_output", "the password is hunter2")
    ]


def llm_guard(tripped: bool, reason: str = "") -> dict[str, Any]:
    """An llm check whose (scripted) model gives this verdict."""
    verdict = {"tool_calls": [{"name": "verdict", "input": {"tripped": tripped, "reason": reason}}]}
    model = {"provider": "scripted", "script": [verdict]}
    return {"llm": {"prompt": "Does the text promise a refund?", "model": model}}


@pytest.mark.parametrize("tripped", [True, False])
async def test_an_llm_guard_is_a_model_s_verdict(
    start: Start, model_log: ModelLog, tripped: bool
) -> None:
    spec = scripted(
        {"text": "you get a refund"},
        guardrails={"output": [llm_guard(tripped, "promises a refund")]},
    )
    async with start([]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    if not tripped:
        assert result.succeeded, result.error
        return
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.message) == (
        "guardrail-tripped",
        "output guardrail 'llm' tripped: promises a refund",
    )


async def test_an_llm_guard_asks_its_model_with_the_prompt_and_the_checked_value(
    start: Start, model_log: ModelLog
) -> None:
    """The check goes through the worker's model client, as a step's call does: the
    prompt is the system message, the checked value the user's, the verdict a tool call."""
    spec = scripted(
        calls(("ask_user", {"q": "refund?"})),
        {"text": "done"},
        tools=[{"type": "client", "name": "ask_user"}],
        guardrails={"tool_output": [llm_guard(True, "promises a refund")]},
    )
    async with start([]) as client:
        run_id = await client.runs.submit(spec)
        call = await wait_event(client, run_id, of_type("tool-call"))
        await client.runs.submit_tool_result(run_id, call.model_dump()["tool_call_id"], "yes")
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.succeeded, result.error
    assert _denied(result) == [
        ("tool_output guardrail 'llm' tripped: promises a refund", True, "denied")
    ]
    (asked,) = [
        c.request for c in model_log.calls if c.request.system == "Does the text promise a refund?"
    ]
    assert [m.content for m in asked.messages] == [
        '{"stage": "tool_output", "checked": "yes", "tool": "ask_user"}'
    ]
    assert [t.name for t in asked.tools] == ["verdict"]


async def test_an_llm_guard_names_only_a_model_the_deployment_offers(start: Start) -> None:
    model = {"provider": "openai", "name": "gpt-4o", "base_url": "http://203.0.113.9/v1"}
    guard = {"llm": {"prompt": "Is it rude?", "model": model}}
    async with start([]) as client:
        with pytest.raises(SpecError) as refused:
            await client.runs.submit(scripted({"text": "hi"}, guardrails={"input": [guard]}))
    assert refused.value.message == (
        "guardrails.input[0].llm.model.base_url: this deployment does not let specs choose a URL; "
        "name an endpoint of its models file (or a provider) instead"
    )
