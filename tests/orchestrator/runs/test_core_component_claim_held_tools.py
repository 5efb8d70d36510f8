"""A worker that read a run's tools (for a model step of the run) claims the run's calls
without the claim reading the tool again: it sends the stamp it read them under, and
claim_call answers `tool_held` when that is the run's (a later run of the same id has
another stamp, and is sent its tool)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agentq.orchestrator.calls.home import HeldTools, RunCallHome
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.runs.definitions import stored_tool
from agentq.orchestrator.runs.state import (
    BeginStep,
    CallRecord,
    CallStatus,
    ClaimCall,
    CommitStep,
    Outcome,
    StepAfter,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import model_job, tool_job
from tests.support.embedded_runs import memory_run_store
from tests.support.run_inputs import TOOL, one_tool_run

pytestmark = pytest.mark.component

RUN = "held1"


@pytest.fixture
async def stamp(store: RunStore) -> str:
    """The run created, its step 0 begun (the stamp its worker read) and committed with
    calls `c1` (of tool `t`) and `c2` (of a tool the run does not define)."""
    await store.create(one_tool_run(RUN))
    begun = await store.begin_step(BeginStep(run_id=RUN, step=0, event="{}"))
    plans = [
        CallPlan(id=i, name=n, input={}, status=CallStatus.QUEUED, queue="tools")
        for i, n in (("c1", "t"), ("c2", "gone"))
    ]
    commit = CommitStep(
        run_id=RUN,
        step=0,
        resp="{}",
        assistant=json.dumps({"role": "assistant", "content": ""}),
        text="",
        finish_reason="tool-calls",
        usage={},
        after=StepAfter.CONTINUE,
        order=json.dumps(["c1", "c2"]),
        calls=[CallRecord(id=p.id, call=p.model_dump_json(), status=p.status) for p in plans],
        events=[],
        jobs=[tool_job(RUN, 0, p) for p in plans],
        pending=2,
        parked=0,
        finishes_now=False,
        next_job=model_job(RUN, 1),
    )
    assert (await store.commit_step(commit)).outcome == Outcome.COMMITTED
    return begun.stamp


@pytest.fixture
async def store() -> AsyncIterator[RunStore]:
    async with memory_run_store("held-tools") as store:
        yield store


def _claim(call_id: str, known_stamp: str | None) -> ClaimCall:
    return ClaimCall(run_id=RUN, step=0, call_id=call_id, event="{}", known_stamp=known_stamp)


async def test_a_claim_under_the_runs_stamp_does_not_read_the_tool(
    store: RunStore, stamp: str
) -> None:
    held = await store.claim_call(_claim("c1", stamp))
    assert (held.outcome, held.tool_held, held.tool) == (Outcome.CLAIMED, True, None)
    # Another stamp (a worker holding an earlier run of the id), or none: the tool is read.
    for other in ("another", None):
        read = await store.claim_call(_claim("c1", other))
        assert (read.outcome, read.tool_held, read.tool) == (Outcome.CLAIMED, False, TOOL)


async def test_a_home_holding_the_tools_claims_with_the_tool_it_holds(
    store: RunStore, stamp: str
) -> None:
    tools = HeldTools(stamp, [stored_tool(TOOL)])
    claimed = await RunCallHome(store, RUN, 0, "c1", tools).claim(attempt=1)
    assert claimed is not None
    assert claimed.tool == stored_tool(TOOL)
    # A tool the run does not define is not defined either way.
    undefined = await RunCallHome(store, RUN, 0, "c2", tools).claim(attempt=1)
    assert undefined is not None
    assert undefined.tool is None
    stale = HeldTools("another", [])
    claimed = await RunCallHome(store, RUN, 0, "c1", stale).claim(attempt=1)
    assert claimed is not None
    assert claimed.tool == stored_tool(TOOL)
