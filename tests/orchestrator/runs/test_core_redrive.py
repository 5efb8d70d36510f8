"""The sweeper's transition (`redrive`) and its pass, on a real redis-server: a step
whose job was lost is driven again, once; a job that survived is not doubled; a
parked run is left alone; a pass reads only the stale window of the moving index.

(The `redrive` probe of every state, delivered twice, is in test_core_state_table.py;
these are the states that table cannot build: a job gone behind the run's back.)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import QueuedJob
from agentq.orchestrator.core.keys import ARQ_IN_PROGRESS_PREFIX
from agentq.orchestrator.core.messages import ToolResultPart, UserMessage
from agentq.orchestrator.core.run_ids import ParentLink, child_run_id
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.runs.children import parent_job
from agentq.orchestrator.runs.redrive import Redriver
from agentq.orchestrator.runs.state import (
    BeginStep,
    CallRecord,
    CallStatus,
    CommitStep,
    CreateRun,
    FailureKind,
    Outcome,
    Redrive,
    ResolveApproval,
    RunFailure,
    StepAfter,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import (
    expiry_job,
    model_job,
    result_args,
    start_job,
    tool_job,
)
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.workflow import WorkflowToolConfig
from agentq.orchestrator.tools.workflow_graph import NodeOutcome, WorkflowGraph
from agentq.workers.tools.workflow import WorkflowCall

pytestmark = pytest.mark.component

SPEC = json.dumps({"model": {"provider": "scripted", "script": []}, "prompt": "go"})


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = connect(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def four_partitions() -> Iterator[None]:
    keys.use_partitions(4)
    try:
        yield
    finally:
        keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


def _event(run_id: str, type_: str) -> str:
    return json.dumps({"type": type_, "run_id": run_id, "at": 0, "step": 0})


def _call(call_id: str, status: CallStatus) -> CallPlan:
    return CallPlan(id=call_id, name="t", input={}, status=status, queue="tools")


T_TOOL = json.dumps({"name": "t", "kind": "function", "queue": "tools"})


async def _create(
    store: RunStore, run_id: str, parent: ParentLink | None = None, tool: str = T_TOOL
) -> None:
    name = json.loads(tool)["name"]
    await store.create(
        CreateRun(
            run_id=run_id,
            spec=SPEC,
            spec_hash="h",
            tools={name: tool},
            tool_order=[name],
            messages=[UserMessage(content="go").model_dump_json()],
            trace="{}",
            event=json.dumps({"type": "start", "run_id": run_id, "at": 0}),
            next_job=model_job(run_id, 0),
            parent=parent.model_dump_json() if parent is not None else None,
            parent_job=parent_job(run_id, parent) if parent is not None else None,
        )
    )


async def _commit(store: RunStore, run_id: str, calls: list[tuple[str, CallStatus]]) -> None:
    plans = [_call(i, s) for i, s in calls]
    jobs = [tool_job(run_id, 0, p) for p in plans if p.status == CallStatus.QUEUED]
    await _commit_plans(store, run_id, plans, jobs)


async def _commit_plans(
    store: RunStore, run_id: str, plans: list[CallPlan], jobs: list[QueuedJob]
) -> None:
    await store.begin_step(BeginStep(run_id=run_id, step=0, event=_event(run_id, "start-step")))
    await store.commit_step(
        CommitStep(
            run_id=run_id,
            step=0,
            resp="{}",
            assistant='{"role":"assistant","content":[]}',
            text="",
            finish_reason="tool-calls",
            usage={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
            after=StepAfter.CONTINUE,
            order=json.dumps([p.id for p in plans]),
            calls=[CallRecord(id=p.id, call=p.model_dump_json(), status=p.status) for p in plans],
            events=[_event(run_id, "finish-step")],
            jobs=jobs,
            pending=len(plans),
            parked=sum(1 for p in plans if p.status != CallStatus.QUEUED),
            finishes_now=False,
            next_job=model_job(run_id, 1),
        )
    )


def _timers(queue: str, job_id: str) -> str:
    return keys.timers(queue, keys.job_partition(job_id))


async def _lose(redis: Redis, job_id: str, queue: str) -> None:
    """What a failover can do to a job: its key and its queue (or timer) entry gone."""
    await redis.delete(keys.arq_job(job_id))
    await redis.zrem(keys.job_queue(queue, job_id), job_id)
    await redis.zrem(_timers(queue, job_id), job_id)


async def _queued(redis: Redis, job_id: str, queue: str) -> bool:
    """Stored and due somewhere: in its queue, or (a timer, such as a deadline) in its
    queue's timers."""
    in_queue = await redis.zscore(keys.job_queue(queue, job_id), job_id) is not None
    timed = await redis.zscore(_timers(queue, job_id), job_id) is not None
    return bool(await redis.exists(keys.arq_job(job_id))) and (in_queue or timed)


async def _index(redis: Redis, run_id: str) -> float | None:
    score: float | None = await redis.zscore(keys.moving_runs(keys.partition_of(run_id)), run_id)
    return score


def _redriver(store: RunStore, after_s: float = 30.0, limit: int = 100) -> Redriver:
    return Redriver(store, after_s=after_s, limit=limit)


async def _transition(store: RunStore, run_id: str) -> Redrive:
    transition, _ = await _redriver(store)._read(run_id)
    return transition


async def test_a_lost_model_job_is_enqueued_again_once(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store, "r1")
    job_id = keys.model_job_id("r1", 0)
    await _lose(redis, job_id, "model")

    sweeper = _redriver(store)
    assert await sweeper.redrive("r1") == 1
    assert await _queued(redis, job_id, "model")
    assert await sweeper.redrive("r1") == 0  # a second delivery: the job is there now


async def test_a_held_or_handed_on_model_step_is_not_doubled(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store, "r1")
    job_id = keys.model_job_id("r1", 0)
    await _lose(redis, job_id, "model")
    # A worker holds it (its key was read and deleted by arq; the lease still names it).
    await redis.set(ARQ_IN_PROGRESS_PREFIX + job_id, "w1")
    assert (await store.redrive(await _transition(store, "r1"))).outcome == Outcome.IN_HAND
    await redis.delete(ARQ_IN_PROGRESS_PREFIX + job_id)
    # The step handed on to its summary job.
    await redis.set(keys.arq_job(keys.summary_job_id("r1", 0)), "{}")
    assert await _redriver(store).redrive("r1") == 0
    assert not await redis.exists(keys.arq_job(job_id))


async def test_a_lost_tool_job_is_enqueued_again_and_its_sibling_left(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store, "r1")
    await _commit(store, "r1", [("c1", CallStatus.QUEUED), ("c2", CallStatus.QUEUED)])
    c1, c2 = keys.tool_job_id("r1", 0, "c1"), keys.tool_job_id("r1", 0, "c2")
    before = await redis.get(keys.arq_job(c1))
    await _lose(redis, c2, "tools")

    assert await _redriver(store).redrive("r1") == 1
    assert await _queued(redis, c2, "tools")
    assert await redis.get(keys.arq_job(c1)) == before
    # A recorded call is not driven again, whatever became of its job.
    await store.record_result(
        result_args("r1", 0, ToolResultPart(tool_call_id="c2", tool_name="t", output="ok"))
    )
    await _lose(redis, c2, "tools")
    assert await _redriver(store).redrive("r1") == 0
    assert not await redis.exists(keys.arq_job(c2))


async def test_a_parked_run_is_left_alone_until_its_wait_ends(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store, "r1")
    await _commit(store, "r1", [("c1", CallStatus.AWAITING_APPROVAL)])
    assert await _index(redis, "r1") is not None

    reply = await store.redrive(await _transition(store, "r1"))
    assert reply.outcome == Outcome.PARKED
    assert await _index(redis, "r1") is None  # no pass looks at it while it waits
    assert await redis.zcard(keys.queue("tools")) == 0

    await store.resolve_approval(
        ResolveApproval(
            run_id="r1",
            step=0,
            call_id="c1",
            approved=True,
            event=_event("r1", "tool-approval-response"),
            next_status=CallStatus.QUEUED,
            job=tool_job("r1", 0, _call("c1", CallStatus.QUEUED)),
        )
    )
    assert await _index(redis, "r1") is not None  # moving again: watched again


def _parked(call_id: str, **waits: object) -> CallPlan:
    """A call parked for a client's result, with what ends its wait (`waits`)."""
    return CallPlan(id=call_id, name="t", input={}, status=CallStatus.AWAITING_RESULT, **waits)


async def test_a_parked_calls_lost_deadline_is_enqueued_again_once(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store, "r1")
    plan = _parked("c1", park_timeout_s=60)
    await _commit_plans(store, "r1", [plan], [expiry_job("r1", 0, plan)])
    job_id = keys.expiry_job_id("r1", 0, "c1")
    before = await redis.get(keys.arq_job(job_id))

    sweeper = _redriver(store, after_s=1)
    assert await sweeper.redrive("r1") == 0  # its deadline is in hand: left alone
    assert await redis.get(keys.arq_job(job_id)) == before
    assert await redis.zcard(keys.queue("tools")) == 0
    seconds, _ = await redis.time()
    score = await _index(redis, "r1")
    # Still watched, but looked at again only some thresholds later than a moving run.
    assert score is not None
    assert score > (seconds + 1) * 1000

    await _lose(redis, job_id, "model")
    assert await sweeper.redrive("r1") == 1
    assert await _queued(redis, job_id, "model")
    assert await sweeper.redrive("r1") == 0
    _, status = await store.call_state("r1", 0, "c1")
    assert status == CallStatus.AWAITING_RESULT  # not woken: only its job is back


async def test_a_lost_start_job_is_enqueued_again_until_its_child_exists(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store, "r1")
    plan = _parked("c1", start_queue="model")
    await _commit_plans(store, "r1", [plan], [start_job("r1", 0, plan)])
    job_id = keys.start_job_id("r1", 0, "c1")
    await _lose(redis, job_id, "model")

    assert await _redriver(store).redrive("r1") == 1
    assert await _queued(redis, job_id, "model")
    # The job started the child run, and went: nothing to start again.
    await _lose(redis, job_id, "model")
    await _create(store, child_run_id("r1", 0, "c1"), ParentLink(run_id="r1", step=0, call_id="c1"))
    assert await _redriver(store).redrive("r1") == 0
    assert not await redis.exists(keys.arq_job(job_id))


async def test_an_endeds_lost_answer_is_enqueued_again(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store, "r1")
    plan = _parked("c1", start_queue="model")
    await _commit_plans(store, "r1", [plan], [])
    child = child_run_id("r1", 0, "c1")
    await _create(store, child, ParentLink(run_id="r1", step=0, call_id="c1"))
    assert await _redriver(store).redrive("r1") == 0  # the child runs: nothing lost
    await store.fail_run(child, RunFailure(kind=FailureKind.PROVIDER, message="boom"))
    job_id = keys.parent_job_id(child)
    assert await _queued(redis, job_id, "model")  # its end enqueued the parent's answer

    assert await _redriver(store).redrive("r1") == 0  # in hand: not doubled
    await _lose(redis, job_id, "model")
    assert await _redriver(store).redrive("r1") == 1
    assert await _queued(redis, job_id, "model")
    assert await _redriver(store).redrive("r1") == 0


async def test_an_ended_or_unknown_run_leaves_the_index(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store, "r1")
    await store.cancel("r1", "stop")
    assert await _index(redis, "r1") is None
    await redis.zadd(keys.moving_runs(), {"ghost": 0})
    assert await _redriver(store).redrive("ghost") == 0
    assert await _index(redis, "ghost") is None


async def test_the_index_is_the_partitions_own(redis: Redis, four_partitions: None) -> None:
    store = RunStore(redis)
    runs = [f"run-{i}" for i in range(12)]
    for run_id in runs:
        await _create(store, run_id)
    for run_id in runs:
        assert await _index(redis, run_id) is not None
    assert sum([await redis.zcard(keys.moving_runs(p)) for p in keys.partitions()]) == 12


async def test_a_pass_reads_only_the_stale_window(redis: Redis) -> None:
    store = RunStore(redis)
    healthy = [f"run-{i}" for i in range(200)]
    for run_id in healthy:
        await _create(store, run_id)
    stale = healthy[:3]
    # Three runs last moved long ago (as if their step had been lost a minute back).
    await redis.zadd(keys.moving_runs(), {run_id: 0 for run_id in stale})
    await _lose(redis, keys.model_job_id(stale[1], 0), "model")
    others = {r: await _index(redis, r) for r in healthy[3:]}

    sweeper = _redriver(store, after_s=30.0, limit=2)
    first = await sweeper.sweep()
    second = await sweeper.sweep()
    third = await sweeper.sweep()

    assert (first.examined, second.examined, third.examined) == (2, 1, 0)
    assert first.redriven + second.redriven == 1
    assert await _queued(redis, keys.model_job_id(stale[1], 0), "model")
    assert {r: await _index(redis, r) for r in healthy[3:]} == others  # never read


def _workflow_with_a_child_node() -> WorkflowToolConfig:
    """A workflow whose `think` node (an llm node with tools) runs as a child run."""
    graph = WorkflowGraph.model_validate(
        {
            "nodes": [
                {"id": "in", "kind": "input"},
                {
                    "id": "think",
                    "kind": "llm",
                    "model": "scripted:x",
                    "prompt": "go",
                    "tools": [{"type": "function", "name": "t"}],
                },
                {"id": "out", "kind": "output", "value": "{{think}}"},
            ],
            "edges": [["in", "think"], ["think", "out"]],
        }
    )
    return WorkflowToolConfig(graph=graph, children={"think": {"model": "scripted:x"}})


async def test_a_child_nodes_job_then_its_childs_lost_end_are_enqueued_again(
    redis: Redis,
) -> None:
    store = RunStore(redis)
    config = _workflow_with_a_child_node()
    tool = ToolDef(name="w", kind="workflow", start_queue="model", config=config)
    await _create(store, "r1", tool=tool.model_dump_json())
    plan = CallPlan(
        id="c1", name="w", input={}, status=CallStatus.AWAITING_RESULT, start_queue="model"
    )
    await _commit_plans(store, "r1", [plan], [])
    await store.workflow_record(
        WorkflowCall("r1", 0, plan, config).record("in", NodeOutcome(status="done"))
    )
    node_job = keys.node_job_id("r1", 0, "c1", "think")
    await _lose(redis, node_job, "model")
    assert await _redriver(store).redrive("r1") == 1  # the node's job, which starts its child
    assert await _queued(redis, node_job, "model")

    await _lose(redis, node_job, "model")
    link = ParentLink(run_id="r1", step=0, call_id="c1", node="think")
    await _create(store, link.child_id, link)
    assert await _redriver(store).redrive("r1") == 0  # the child runs: nothing lost

    await store.fail_run(link.child_id, RunFailure(kind=FailureKind.PROVIDER, message="boom"))
    end_job = keys.parent_job_id(link.child_id)
    assert await _redriver(store).redrive("r1") == 0  # its end is in hand
    await _lose(redis, end_job, "model")
    assert await _redriver(store).redrive("r1") == 1
    assert await _queued(redis, end_job, "model")
    assert not await _queued(redis, node_job, "model")
