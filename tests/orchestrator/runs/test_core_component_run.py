"""A run end to end on the embedded runtime: steps, events, joins, stops, refusals."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunNotFoundError, RunTimeoutError, UnknownToolError
from agentq.orchestrator.core.events import Event
from agentq.orchestrator.core.messages import AssistantMessage, ToolMessage, UserMessage
from agentq.orchestrator.runs.result import RunResult
from agentq.orchestrator.runs.state import RunFailure
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.worker.loading import load_tool_modules
from tests.support.embedded_runs import (
    TIMEOUT_S,
    Embedded,
    ModelLog,
    all_events,
    of_type,
    tool_message_parts,
    usage_for,
    wait_event,
)
from tests.support.infra import REPO
from tests.support.sample_tools import add
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def quickstart_tools() -> list[Any]:
    return load_tool_modules([str(EXAMPLES / "quickstart_tools.py")])


@dataclass
class Quickstart:
    """The quickstart example run to its end, with what its model saw."""

    spec: dict[str, Any]
    run_id: str
    result: RunResult
    events: list[Event]
    model_log: ModelLog

    @property
    def call_ids(self) -> list[str]:
        return [c.id for c in self.result.steps[0].tool_calls]


@pytest.fixture
async def quickstart(start: Start, quickstart_tools: list[Any], model_log: ModelLog) -> Quickstart:
    spec = json.loads((EXAMPLES / "quickstart.json").read_text())
    async with start(quickstart_tools) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    return Quickstart(spec, run_id, result, events, model_log)


async def test_quickstart_succeeds_with_its_calls_and_results(quickstart: Quickstart) -> None:
    spec, result = quickstart.spec, quickstart.result
    assert result.status == "succeeded", result.error
    assert result.id == quickstart.run_id
    assert result.text == spec["model"]["script"][1]["text"]
    assert result.error is None
    assert result.pending == []

    first, second = result.steps
    assert (first.index, first.text, first.finish_reason) == (
        0,
        "Let me look that up.",
        "tool-calls",
    )
    assert [(c.name, c.input) for c in first.tool_calls] == [
        ("weather", {"city": "Lisbon"}),
        ("add", {"a": 19.5, "b": 1.5}),
        ("countdown", {"n": 3}),
    ]
    ids = quickstart.call_ids
    assert len(set(ids)) == 3
    assert [(r.tool_call_id, r.name, r.output, r.is_error) for r in first.tool_results] == [
        (ids[0], "weather", {"city": "Lisbon", "temperature_c": 21, "sky": "clear"}, False),
        (ids[1], "add", 21.0, False),
        (ids[2], "countdown", "liftoff", False),
    ]
    assert (second.index, second.tool_calls, second.tool_results, second.finish_reason) == (
        1,
        [],
        [],
        "stop",
    )


async def test_quickstart_usage_per_step_and_in_total(quickstart: Quickstart) -> None:
    result = quickstart.result
    assert [s.usage for s in result.steps] == [usage_for(0), usage_for(1)]
    assert result.usage == usage_for(0) + usage_for(1)


async def test_quickstart_messages_are_ready_to_append_to_the_history(
    quickstart: Quickstart,
) -> None:
    result = quickstart.result
    assistant, tool_msg, final = result.messages
    assert isinstance(assistant, AssistantMessage)
    assert [c.tool_call_id for c in assistant.tool_calls()] == quickstart.call_ids
    assert assistant.text() == "Let me look that up."
    assert isinstance(tool_msg, ToolMessage)
    assert [(p.tool_call_id, p.output) for p in tool_msg.content] == [
        (r.tool_call_id, r.output) for r in result.steps[0].tool_results
    ]
    assert isinstance(final, AssistantMessage)
    assert final.text() == result.text
    follow_up = RunSpec.model_validate(
        {
            "model": "openai:m",
            "messages": [
                UserMessage(content=quickstart.spec["prompt"]).model_dump(),
                *[m.model_dump() for m in result.messages],
                {"role": "user", "content": "thanks"},
            ],
        }
    )
    assert len(follow_up.initial_messages()) == 5


async def test_quickstart_model_sees_its_calls_and_the_results_in_call_order(
    quickstart: Quickstart,
) -> None:
    model_log = quickstart.model_log
    request = model_log.request(1)
    assert request.system == quickstart.spec["system"]
    assert [m.role for m in request.messages] == ["user", "assistant", "tool"]
    assert request.messages[2] == quickstart.result.messages[1]
    assert sorted(t.name for t in model_log.request(0).tools) == ["add", "countdown", "weather"]


async def test_quickstart_events_are_numbered_and_carry_the_documented_fields(
    quickstart: Quickstart,
) -> None:
    result, events, ids = quickstart.result, quickstart.events, quickstart.call_ids
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(e.run_id == quickstart.run_id and isinstance(e.at, float) for e in events)
    types = [e.type for e in events]
    assert types[0] == "start"
    assert types[-1] == "finish"
    assert types.count("start-step") == 2
    assert types.count("finish-step") == 2
    assert types.count("tool-call") == 3
    assert types.count("tool-running") == 3
    assert types.count("tool-result") == 3
    inputs = {c.id: c.input for c in result.steps[0].tool_calls}
    for event in events:
        body = event.model_dump()
        if event.type in (
            "start-step",
            "finish-step",
            "text-delta",
            "tool-call",
            "tool-running",
            "tool-result",
            "tool-progress",
        ):
            assert body.get("step") is not None, body
        if event.type.startswith("tool-"):
            assert body.get("tool_call_id") in ids, body
            assert body.get("tool_name") in ("weather", "add", "countdown"), body
        if event.type == "tool-call":
            assert body["input"] == inputs[body["tool_call_id"]]
        if event.type == "tool-result":
            assert "output" in body
    step0 = [e for e in events if getattr(e, "step", None) == 0]
    step1 = [e for e in events if getattr(e, "step", None) == 1]
    assert max(e.seq for e in step0) < min(e.seq for e in step1)


async def test_quickstart_progress_step_ends_and_finish_events(quickstart: Quickstart) -> None:
    result, events = quickstart.result, quickstart.events
    progress = [e.model_dump()["output"] for e in events if e.type == "tool-progress"]
    assert progress == ["3...", "2...", "1...", "liftoff"]
    finish_steps = [e.model_dump() for e in events if e.type == "finish-step"]
    assert [f["finish_reason"] for f in finish_steps] == ["tool-calls", "stop"]
    assert finish_steps[0]["usage"] == usage_for(0).model_dump()
    finish = events[-1].model_dump()
    assert (finish["status"], finish["text"]) == ("succeeded", result.text)
    assert finish["usage"] == result.usage.model_dump()


async def test_quickstart_text_deltas_add_up_to_each_steps_text(quickstart: Quickstart) -> None:
    for step in (0, 1):
        deltas = "".join(
            e.model_dump()["delta"]
            for e in quickstart.events
            if e.type == "text-delta" and e.step == step
        )
        assert deltas == quickstart.result.steps[step].text


async def test_quickstart_reasoning_shows_live_and_stays_out_of_the_text(
    quickstart: Quickstart,
) -> None:
    """The demo's first step shows its reasoning live; no step's text holds it."""
    events, result = quickstart.events, quickstart.result
    shown = "".join(e.model_dump()["delta"] for e in events if e.type == "reasoning-delta")
    assert shown == quickstart.spec["model"]["script"][0]["reasoning"]
    assert all(shown not in step.text for step in result.steps)


async def test_parallel_calls_run_together_and_join_once(start: Start, model_log: ModelLog) -> None:
    width = 5
    barrier = asyncio.Barrier(width)
    seen: list[int] = []

    @tool
    async def meet(i: int) -> int:
        seen.append(i)
        # Only passes if all calls of the step are running at the same time.
        await asyncio.wait_for(barrier.wait(), TIMEOUT_S)
        await asyncio.sleep(0.002 * (width - i))  # finish in reverse order
        return i * 10

    step = calls(*[("meet", {"i": i}) for i in range(width)])
    spec = scripted(step, step, step, {"text": "met"}, tools=["meet"])
    async with start([meet]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    assert sorted(seen) == sorted(list(range(width)) * 3)
    starts = Counter(e.step for e in events if e.type == "start-step")
    assert starts == {0: 1, 1: 1, 2: 1, 3: 1}
    assert [c.step for c in model_log.calls] == [0, 1, 2, 3]
    for n in range(3):
        assert [r.output for r in result.steps[n].tool_results] == [i * 10 for i in range(width)]
        assert [p.output for p in tool_message_parts(result.messages, n)] == [
            i * 10 for i in range(width)
        ]
    assert [m.role for m in result.messages] == ["assistant", "tool"] * 3 + ["assistant"]


@pytest.mark.parametrize(
    ("extra", "n_steps"),
    [
        pytest.param({"max_steps": 1}, 1, id="max-steps-1"),
        pytest.param({"max_steps": 3}, 3, id="max-steps-3"),
        pytest.param({"stop_when": [{"step_count_is": 2}]}, 2, id="step-count-is"),
        pytest.param({"stop_when": [{"has_tool_call": "final"}]}, 3, id="has-tool-call"),
        pytest.param(
            {"max_steps": 2, "stop_when": [{"has_tool_call": "final"}]}, 2, id="max-first"
        ),
    ],
)
async def test_stop_conditions(start: Start, extra: dict[str, Any], n_steps: int) -> None:
    ran: list[str] = []

    @tool
    def final(answer: str) -> str:
        ran.append(answer)
        return "ok"

    script = [
        {"text": "s0", **calls(("add", {"a": 0, "b": 1}))},
        {"text": "s1", **calls(("add", {"a": 1, "b": 1}))},
        {"text": "s2", **calls(("final", {"answer": "42"}))},
        {"text": "s3", **calls(("add", {"a": 3, "b": 1}))},
        {"text": "never"},
    ]
    async with start([add, final]) as client:
        run_id = await client.runs.submit(scripted(*script, tools=["add", "final"], **extra))
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    assert len(result.steps) == n_steps
    assert result.text == f"s{n_steps - 1}"
    # The last step's calls still ran and their results close the history.
    last = result.steps[-1]
    assert len(last.tool_results) == 1
    assert not last.tool_results[0].is_error
    assert result.messages[-1].role == "tool"
    assert sum(e.type == "start-step" for e in events) == n_steps
    assert ran == (["42"] if n_steps >= 3 else [])


async def test_tools_are_offered_in_spec_order(start: Start, model_log: ModelLog) -> None:
    names = [f"t{i}" for i in range(8)]

    def make(name: str) -> Any:
        def fn() -> str:
            return name

        return tool(name=name)(fn)

    async with start([make(n) for n in names]) as client:
        run_id = await client.runs.submit(scripted({"text": "hi"}, tools=names))
        await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert [t.name for t in model_log.request(0).tools] == names


async def test_submit_with_the_same_id_runs_once(start: Start) -> None:
    count: list[int] = []

    @tool
    def once() -> str:
        count.append(1)
        return "ran"

    spec = scripted(calls(("once", {})), {"text": "done"}, tools=["once"], id="fixed-id-1")
    async with start([once]) as client:
        first = await client.runs.submit(spec)
        second = await client.runs.submit(spec)
        result = await client.runs.wait(first, timeout_s=TIMEOUT_S)
        third = await client.runs.submit(spec)
        events = await all_events(client, first)

    assert first == second == third == "fixed-id-1"
    assert result.status == "succeeded"
    assert count == [1]
    assert [e.type for e in events].count("start") == 1
    assert [e.type for e in events].count("start-step") == 2


async def _run_keys(client: Client) -> list[bytes]:
    found = []
    for pattern in ("aq:run:*", "arq:job:*", "arq:*"):
        found += [k async for k in client.redis.scan_iter(match=pattern)]
    for queue in ("aq:queue:model", "aq:queue:tools"):
        if await client.redis.zcard(queue):
            found.append(queue.encode())
    return found


async def test_an_unserved_function_tool_is_refused_and_nothing_is_created(start: Start) -> None:
    spec = scripted({"text": "x"}, tools=["add", "not_served"], id="refused-1")
    async with start([add]) as client:
        with pytest.raises(UnknownToolError) as info:
            await client.runs.submit(spec)
        keys = await _run_keys(client)
        with pytest.raises(RunNotFoundError):
            await client.runs.wait("refused-1", timeout_s=1)
    assert "tools[1]" in info.value.message
    assert "'not_served'" in info.value.message
    assert "agentq worker --tools" in info.value.message
    assert keys == []


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"model": "gpt-4o", "prompt": "x"}, "model", id="model-form"),
        pytest.param({"model": "scripted:x", "prompt": "x"}, "model", id="scripted-no-script"),
        pytest.param({"model": {"provider": "scripted", "script": []}}, "", id="no-prompt"),
        pytest.param(
            {"model": "openai:m", "prompt": "x", "max_steps": 0}, "max_steps", id="max-steps"
        ),
        pytest.param(
            {"model": "openai:m", "prompt": "x", "tools": [{"type": "function"}]},
            "tools",
            id="tool",
        ),
        pytest.param('{"model": "openai:m", "prompt": 3}', "prompt", id="json-text"),
    ],
)
async def test_a_malformed_spec_is_a_validation_error(start: Start, spec: Any, field: str) -> None:
    async with start([add]) as client:
        with pytest.raises(ValidationError) as info:
            await client.runs.submit(spec)
        keys = await _run_keys(client)
    assert keys == []
    locs = [".".join(str(p) for p in e["loc"]) for e in info.value.errors()]
    assert any(loc.startswith(field) for loc in locs), locs


async def test_a_provider_error_fails_the_run(start: Start) -> None:
    spec = scripted(calls(("add", {"a": 1, "b": 2})), tools=["add"])  # no step 1 in the script
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.step) == ("provider", 1)
    assert "step 1 was asked for" in result.error.message
    assert [s.index for s in result.steps] == [0]
    last = events[-1].model_dump()
    assert last["type"] == "error"
    assert last["status"] == "failed"
    assert RunFailure.model_validate(last["error"]) == result.error
    assert [e.type for e in events].count("error") == 1


async def test_wait_for_an_unknown_run(start: Start) -> None:
    async with start([add]) as client:
        with pytest.raises(RunNotFoundError):
            await client.runs.wait("no-such-run", timeout_s=1)
        with pytest.raises(RunNotFoundError):
            await client.runs.result("no-such-run")


async def all_events_follow(client: Client, run_id: str) -> list[Any]:
    return [e async for e in client.runs.events(run_id, follow=True)]


async def test_events_resume_after_any_seq(start: Start) -> None:
    spec = scripted(
        {"text": "a", **calls(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2}))},
        {"text": "b", **calls(("add", {"a": 3, "b": 3}))},
        {"text": "done"},
        tools=["add"],
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        every = await all_events(client, run_id)
        n = len(every)
        for k in sorted({0, 1, 2, n // 2, n - 1, n, n + 5}):
            tail = await all_events(client, run_id, after=k)
            assert [e.seq for e in tail] == [e.seq for e in every if e.seq > k], k
            assert tail == every[k:], k
        followed = await asyncio.wait_for(all_events_follow(client, run_id), TIMEOUT_S)
        followed_tail = [e async for e in client.runs.events(run_id, after=n // 2, follow=True)]
    assert every[-1].type == "finish"
    assert followed == every
    assert followed_tail == every[n // 2 :]


async def test_following_a_live_run_ends_at_its_terminal_event(start: Start) -> None:
    gate = asyncio.Event()

    @tool
    async def slow() -> str:
        await asyncio.wait_for(gate.wait(), TIMEOUT_S)
        return "opened"

    spec = scripted(calls(("slow", {})), {"text": "done"}, tools=["slow"])
    async with start([slow]) as client:
        run_id = await client.runs.submit(spec)
        running = await wait_event(client, run_id, of_type("tool-running"))
        follower = asyncio.create_task(all_events_follow(client, run_id))
        resumed = asyncio.create_task(
            asyncio.wait_for(_collect(client, run_id, running.seq), TIMEOUT_S)
        )
        await asyncio.sleep(0)  # let both readers block on the stream
        gate.set()
        seen = await asyncio.wait_for(follower, TIMEOUT_S)
        tail = await resumed
        every = await all_events(client, run_id)
    assert seen == every
    assert seen[-1].type == "finish"
    assert tail == every[running.seq :]


async def test_following_after_the_terminal_event_ends(start: Start) -> None:
    async with start([add]) as client:
        run_id = await client.runs.submit(scripted({"text": "done"}))
        await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        last = (await all_events(client, run_id))[-1].seq
        # A finished run has nothing more to follow: this must end at once, not hang.
        tail = await asyncio.wait_for(_collect(client, run_id, last), 2.0)
    assert tail == []


async def test_wait_gives_up_on_a_run_that_does_not_finish(start: Start) -> None:
    spec = scripted(calls(("ask", {})), {"text": "done"}, tools=[{"type": "client", "name": "ask"}])
    async with start([]) as client:
        run_id = await client.runs.submit(spec)
        await wait_event(client, run_id, of_type("finish-step", step=0))
        with pytest.raises(RunTimeoutError, match=r"did not finish within 0\.2 s"):
            await client.runs.wait(run_id, timeout_s=0.2)
        assert (await client.runs.result(run_id)).status == "awaiting"


async def test_active_tools_limit_what_the_model_may_call(
    start: Start, model_log: ModelLog
) -> None:
    @tool
    def mul(a: float, b: float) -> float:
        return a * b

    spec = scripted(
        calls(("add", {"a": 1, "b": 2}), ("mul", {"a": 2, "b": 3})),
        {"text": "done"},
        tools=["add", "mul"],
        active_tools=["add"],
    )
    async with start([add, mul]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert [t.name for t in model_log.request(0).tools] == ["add"]
    added, multiplied = result.steps[0].tool_results
    assert (added.output, added.is_error) == (3.0, False)
    assert multiplied.is_error
    assert "unavailable tool 'mul'" in multiplied.output
    assert "Available tools: add." in multiplied.output


async def test_duplicate_call_ids_from_the_model_are_made_unique(start: Start) -> None:
    step = {
        "tool_calls": [
            {"id": "same", "name": "add", "input": {"a": 1, "b": 1}},
            {"id": "same", "name": "add", "input": {"a": 2, "b": 2}},
        ]
    }
    async with start([add]) as client:
        result = await client.runs.wait(
            await client.runs.submit(scripted(step, {"text": "ok"}, tools=["add"])),
            timeout_s=TIMEOUT_S,
        )
    ids = [c.id for c in result.steps[0].tool_calls]
    assert ids[0] == "same"
    assert len(set(ids)) == 2
    assert [(r.tool_call_id, r.output) for r in result.steps[0].tool_results] == [
        (ids[0], 2.0),
        (ids[1], 4.0),
    ]


async def test_a_synthesized_id_never_collides_with_a_model_id(start: Start) -> None:
    step = {
        "tool_calls": [
            {"id": "call_0_1", "name": "add", "input": {"a": 1, "b": 1}},
            {"name": "add", "input": {"a": 2, "b": 2}},  # the scripted model names it call_0_1
        ]
    }
    async with start([add]) as client:
        run_id = await client.runs.submit(scripted(step, {"text": "ok"}, tools=["add"]))
        result = await client.runs.wait(run_id, timeout_s=2.0)
    assert result.status == "succeeded"
    assert [r.output for r in result.steps[0].tool_results] == [2.0, 4.0]


async def _collect(client: Client, run_id: str, after: int) -> list[Any]:
    return [e async for e in client.runs.events(run_id, after=after, follow=True)]


async def test_job_payloads_do_not_grow_with_the_run(start: Start, model_log: ModelLog) -> None:
    """History is stored once: the arq job of step 15 is the size of the job of step 1."""
    tool_jobs: dict[int, int] = {}

    @tool
    async def probe(step: int, blob: str) -> str:
        assert model_log.redis is not None
        async for key in model_log.redis.scan_iter(match=f"arq:job:aq:*:{step}:call:*"):
            payload = await model_log.redis.get(key)
            assert payload is not None
            tool_jobs[step] = len(payload)
        return blob  # the history grows by two blobs per step

    blob = "x" * 2000
    n = 16
    script = [
        {"text": f"step {i}", **calls(("probe", {"step": i, "blob": blob}))} for i in range(n)
    ]
    spec = scripted(*script, {"text": "done"}, tools=["probe"], max_steps=n + 1)
    async with start([probe]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        _, history, _ = await client.runs.store.snapshot(run_id)
        history_bytes = sum(len(m) for m in history)
        stored: list[bytes] = await client.redis.lrange(keys.messages(run_id), 0, -1)  # type: ignore[misc]
        stored_bytes = sum(len(m) for m in stored)
    assert result.status == "succeeded", result.error
    assert history_bytes > 2 * n * len(blob)
    # The message list holds the calls' inputs; each output is stored once, in its step.
    assert n * len(blob) < stored_bytes < 2 * n * len(blob)

    model_jobs = {c.step: len(c.job_payload) for c in model_log.calls if c.job_payload is not None}
    assert sorted(model_jobs) == list(range(n + 1)), "the model job payload was not seen"
    assert sorted(tool_jobs) == list(range(n))
    # Equal but for the digits of the step number (and of the call id for a tool job).
    # (enqueued_at is a float whose shortest repr may vary by a digit or two).
    assert abs(model_jobs[15] - model_jobs[1]) <= 8, model_jobs
    assert abs(tool_jobs[15] - tool_jobs[1]) <= 8, tool_jobs
    assert max(model_jobs.values()) < 2000
    assert max(tool_jobs.values()) < 2000
    # The model did see the whole history at the last step.
    assert len(model_log.request(n).messages) == 1 + 2 * n
