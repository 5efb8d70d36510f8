"""The run state machine as a table: every transition, on every run and call state.

Each row builds a run in a known state through the real transitions, applies one
transition twice (the second is a duplicate delivery) and checks the typed reply and
the Redis state that results (status, step, pending and parked counts, the call's
status, events appended, jobs enqueued) against `expect`, a small model of the Lua
scripts. Together with the scripts' headers this table is the state machine's
documentation; it runs on the embedded Redis and on a real redis-server.

States address step 0 and call `c1`; `c2` is a queued sibling that keeps the step
open; "moved-on" is a run whose step 0 has joined (so step 0 is stale).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.redis.connect import connect, forget_memory_server
from agentq.orchestrator.runs.state import (
    TERMINAL_STATUSES,
    BeginStep,
    CallRecord,
    CallStatus,
    ClaimCall,
    CommitStep,
    CreateRun,
    Emit,
    ExpireParked,
    FailureKind,
    HoldStep,
    InputStatus,
    MetaField,
    Outcome,
    PostResult,
    RecordResult,
    Redrive,
    RedriveCall,
    Reply,
    ResolveApproval,
    RunFailure,
    RunStatus,
    StartQueued,
    StepAfter,
    StepField,
    WorkflowFinal,
    WorkflowRecord,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import (
    input_answer_args,
    input_request_args,
    model_job,
    result_args,
    tool_job,
)
from tests.support.infra import RedisServer
from tests.support.run_inputs import one_tool_run

pytestmark = pytest.mark.component

RUN = "r1"
REQUEST = "c1.1.1"
PARKED = (CallStatus.AWAITING_APPROVAL, CallStatus.AWAITING_RESULT)


# -- the model ------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    """What the table knows of a run: enough to predict every transition's effect."""

    status: str | None  # None: no such run
    step: int = 0
    committed: bool = False  # step 0 has its model answer
    c1: str | None = None  # c1's status (None: no such call)
    sibling: bool = False  # c2 is queued, so step 0 stays open
    request: str | None = None  # c1's input request's status
    after: StepAfter = StepAfter.CONTINUE
    spec_hash: str = "h"  # the hash of the spec the run was created with
    held: bool = False  # a shared budget holds its step (one step-held event per hold)

    @property
    def pending(self) -> int:
        return int(self.c1 not in (None, CallStatus.DONE)) + int(self.sibling)

    @property
    def parked(self) -> int:
        return int(self.c1 in PARKED) + int(self.request == InputStatus.PENDING)


@dataclass(frozen=True)
class Effect:
    outcome: Outcome
    model: Model
    events: int = 0
    jobs: int = 0


def _guard(m: Model) -> Outcome | None:
    if m.status is None:
        return Outcome.UNKNOWN_RUN
    if m.status in TERMINAL_STATUSES:
        return Outcome.CLOSED
    if m.step != 0:
        return Outcome.STALE
    return None


def _unparked(m: Model) -> Model:
    """The model after parked - 1 (the caller already changed what was parked)."""
    if m.parked <= 0 and m.status == RunStatus.AWAITING:
        return replace(m, status=RunStatus.RUNNING)
    return m


def _completed(m: Model, events: int) -> Effect:
    """c1's result is in (m has c1 done): one result event, then maybe the join."""
    if m.pending > 0:
        return Effect(Outcome.RECORDED, m, events + 1)
    if m.after == StepAfter.CONTINUE:
        moved = replace(m, step=1, status=RunStatus.RUNNING)
        return Effect(Outcome.CONTINUED, moved, events + 1, jobs=1)
    return Effect(Outcome.FINISHED, replace(m, status=RunStatus.SUCCEEDED), events + 2)


def expect(probe: str, m: Model, call: str) -> Effect:
    """The model of the Lua scripts: the reply and effect of `probe` on a run like `m`."""
    c1 = m.c1 if call == "c1" else None
    if probe in ("create_same", "create_other"):
        spec_hash = "h" if probe == "create_same" else "another"
        if m.status is None:
            created = Model(RunStatus.RUNNING, spec_hash=spec_hash)
            return Effect(Outcome.CREATED, created, events=1, jobs=1)
        return Effect(Outcome.EXISTS if spec_hash == m.spec_hash else Outcome.CONFLICT, m)
    if probe == "start_queued":  # no state of the table is queued: started, or ended
        if m.status is None:
            return Effect(Outcome.UNKNOWN_RUN, m)
        return Effect(Outcome.CLOSED if m.status in TERMINAL_STATUSES else Outcome.DUPLICATE, m)
    if probe == "cancel_at_step_end" and m.status == RunStatus.RUNNING:
        return Effect(Outcome.STOPPING, m)  # it ends when its step does
    if probe == "cancel_at_step_end":
        probe = "cancel"
    if probe in ("emit", "fail_run", "cancel"):
        if m.status is None:
            return Effect(Outcome.UNKNOWN_RUN, m)
        if m.status in TERMINAL_STATUSES:
            return Effect(Outcome.CLOSED, m)
        if probe == "emit":
            return Effect(Outcome.EMITTED, m, events=1)
        ended = RunStatus.FAILED if probe == "fail_run" else RunStatus.CANCELLED
        return Effect(Outcome(ended.value), replace(m, status=ended), events=1)
    if (refused := _guard(m)) is not None:
        return Effect(refused, m)
    if probe in ("begin_step", "commit_step"):
        if m.committed:
            return Effect(Outcome.DUPLICATE, m)
        if probe == "begin_step":
            return Effect(Outcome.OK, m, events=1)
        committed = replace(m, committed=True, c1=CallStatus.QUEUED, sibling=True)
        return Effect(Outcome.COMMITTED, committed, events=3, jobs=2)
    if probe == "hold_step":
        if m.committed:
            return Effect(Outcome.DUPLICATE, m)
        return Effect(Outcome.HELD, replace(m, held=True), events=0 if m.held else 1)
    if probe == "redrive":  # every job the table's runs wait for is still queued
        if m.committed and m.c1 not in (CallStatus.QUEUED, CallStatus.RUNNING) and not m.sibling:
            return Effect(Outcome.PARKED, m)
        return Effect(Outcome.IN_HAND, m)
    if probe == "input_answer":
        if m.request != InputStatus.PENDING:
            return Effect(Outcome.WRONG_STATE, m)
        return Effect(Outcome.ANSWERED, _unparked(replace(m, request=InputStatus.ACCEPTED)), 1)
    if c1 is None:
        return Effect(Outcome.UNKNOWN_CALL, m)
    return _expect_call(probe, m, c1)


def _expect_call(probe: str, m: Model, c1: str) -> Effect:
    done = replace(m, c1=CallStatus.DONE)
    if probe == "claim_call":
        if c1 == CallStatus.DONE:
            return Effect(Outcome.DONE, m)
        if c1 in PARKED:
            return Effect(Outcome.NOT_RUNNABLE, m)
        return Effect(Outcome.CLAIMED, replace(m, c1=CallStatus.RUNNING), events=1)
    if probe == "record_result":
        if c1 in PARKED:
            return Effect(Outcome.WRONG_STATE, m)
        if c1 == CallStatus.DONE:
            return Effect(Outcome.DUPLICATE, m)
        return _completed(done, 0)
    if probe == "post_result":
        if c1 != CallStatus.AWAITING_RESULT:
            return Effect(Outcome.WRONG_STATE, m)
        return _completed(_unparked(done), 0)
    if probe == "workflow_record":  # the output node of a workflow call answers it
        if c1 != CallStatus.AWAITING_RESULT:
            return Effect(Outcome.WRONG_STATE, m)
        return _completed(_unparked(done), 1)
    if probe == "expire_parked":
        if c1 not in PARKED:
            return Effect(Outcome.WRONG_STATE, m)
        return _completed(_unparked(done), 0)
    if probe in ("approve", "deny"):
        if c1 != CallStatus.AWAITING_APPROVAL:
            return Effect(Outcome.WRONG_STATE, m)
        if probe == "approve":
            queued = _unparked(replace(m, c1=CallStatus.QUEUED))
            return Effect(Outcome.APPROVED, queued, events=1, jobs=1)
        return _completed(_unparked(done), 1)
    assert probe == "input_request", probe
    if c1 != CallStatus.RUNNING:
        return Effect(Outcome.WRONG_STATE, m)
    if m.request is not None:
        return Effect(Outcome.DUPLICATE, m)
    asked = replace(m, request=InputStatus.PENDING, status=RunStatus.AWAITING)
    return Effect(Outcome.PARKED, asked, events=1)


# -- building runs through the real transitions ---------------------------------------


def _call(call_id: str, status: CallStatus) -> CallPlan:
    return CallPlan(id=call_id, name="t", input={}, status=status, queue="tools")


def _result(call_id: str) -> ToolResultPart:
    return ToolResultPart(tool_call_id=call_id, tool_name="t", output="ok")


def _create(spec_hash: str = "h") -> CreateRun:
    return one_tool_run(RUN, spec_hash=spec_hash)


def _event(type_: str) -> str:
    return json.dumps({"type": type_, "run_id": RUN, "at": 0, "step": 0})


def _commit(calls: list[tuple[str, CallStatus]], after: StepAfter) -> CommitStep:
    plans = [_call(i, s) for i, s in calls]
    return CommitStep(
        run_id=RUN,
        step=0,
        resp="{}",
        assistant='{"role":"assistant","content":[]}',
        text="",
        finish_reason="tool-calls",
        usage={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        after=after,
        order=json.dumps([i for i, _ in calls]),
        calls=[CallRecord(id=p.id, call=p.model_dump_json(), status=p.status) for p in plans],
        events=[_event("tool-call") for _ in plans] + [_event("finish-step")],
        jobs=[tool_job(RUN, 0, p) for p in plans if p.status == CallStatus.QUEUED],
        pending=len(plans),
        parked=sum(1 for p in plans if p.status in PARKED),
        finishes_now=False,
        next_job=model_job(RUN, 1),
    )


def _claim(call_id: str = "c1") -> ClaimCall:
    return ClaimCall(run_id=RUN, step=0, call_id=call_id, event=_event("tool-running"))


def _record(call_id: str = "c1") -> RecordResult:
    return result_args(RUN, 0, _result(call_id))


Build = Callable[[RunStore], Awaitable[None]]


Step = Callable[[RunStore], Awaitable[object]]


def _steps(*transitions: Step) -> Build:
    async def build(store: RunStore) -> None:
        for transition in transitions:
            await transition(store)

    return build


def _with_calls(
    calls: list[tuple[str, CallStatus]], after: StepAfter = StepAfter.CONTINUE
) -> list[Step]:
    return [
        lambda s: s.create(_create()),
        lambda s: s.begin_step(BeginStep(run_id=RUN, step=0, event=_event("start-step"))),
        lambda s: s.commit_step(_commit(calls, after)),
    ]


Q, R_, A_, W = (
    CallStatus.QUEUED,
    CallStatus.RUNNING,
    CallStatus.AWAITING_APPROVAL,
    CallStatus.AWAITING_RESULT,
)
RUNNING, AWAITING = RunStatus.RUNNING, RunStatus.AWAITING

# Live states: (name, how to build it, its model).
LIVE: list[tuple[str, Build, Model]] = [
    ("unknown", _steps(), Model(None)),
    ("fresh", _steps(lambda s: s.create(_create())), Model(RUNNING)),
    (
        "queued+sibling",
        _steps(*_with_calls([("c1", Q), ("c2", Q)])),
        Model(RUNNING, committed=True, c1=Q, sibling=True),
    ),
    ("queued-last", _steps(*_with_calls([("c1", Q)])), Model(RUNNING, committed=True, c1=Q)),
    (
        "running+sibling",
        _steps(*_with_calls([("c1", Q), ("c2", Q)]), lambda s: s.claim_call(_claim())),
        Model(RUNNING, committed=True, c1=R_, sibling=True),
    ),
    (
        "done+sibling",
        _steps(*_with_calls([("c1", Q), ("c2", Q)]), lambda s: s.record_result(_record())),
        Model(RUNNING, committed=True, c1=CallStatus.DONE, sibling=True),
    ),
    ("approval", _steps(*_with_calls([("c1", A_)])), Model(AWAITING, committed=True, c1=A_)),
    ("result", _steps(*_with_calls([("c1", W)])), Model(AWAITING, committed=True, c1=W)),
    (
        "input",
        _steps(
            *_with_calls([("c1", Q)]),
            lambda s: s.claim_call(_claim()),
            lambda s: s.input_request(
                input_request_args(
                    RUN, 0, call_id="c1", tool_name="t", request_id=REQUEST, message="?", schema={}
                )
            ),
        ),
        Model(AWAITING, committed=True, c1=R_, request=InputStatus.PENDING),
    ),
    (
        "moved-on",
        _steps(*_with_calls([("c1", Q)]), lambda s: s.record_result(_record())),
        Model(RUNNING, step=1, committed=True, c1=CallStatus.DONE),
    ),
    (
        "succeeded",
        _steps(*_with_calls([("c1", Q)], StepAfter.FINISH), lambda s: s.record_result(_record())),
        Model(RunStatus.SUCCEEDED, committed=True, c1=CallStatus.DONE, after=StepAfter.FINISH),
    ),
]

FAILURE = RunFailure(kind=FailureKind.INTERNAL, message="boom", step=0)


def _ended(status: RunStatus) -> list[tuple[str, Build, Model]]:
    """Each state with calls in flight, then failed or cancelled."""
    end: Callable[[RunStore], Awaitable[Reply]] = (
        (lambda s: s.fail_run(RUN, FAILURE))
        if status == RunStatus.FAILED
        else (lambda s: s.cancel(RUN, "stop"))
    )
    names = ("queued+sibling", "running+sibling", "done+sibling", "approval", "result")
    return [
        (f"{status}/{name}", _steps(build, end), replace(model, status=status))
        for name, build, model in LIVE
        if name in names
    ]


STATES = LIVE + _ended(RunStatus.FAILED) + _ended(RunStatus.CANCELLED)


def _probe(name: str, call: str) -> Callable[[RunStore], Awaitable[Reply]]:
    result = result_args(RUN, 0, _result(call))
    fields = result.model_dump(exclude={"run_id", "at"})
    probes: dict[str, Callable[[RunStore], Awaitable[Reply]]] = {
        "create_same": lambda s: s.create(_create()),
        "create_other": lambda s: s.create(_create("another")),
        "begin_step": lambda s: s.begin_step(
            BeginStep(run_id=RUN, step=0, event=_event("start-step"))
        ),
        "commit_step": lambda s: s.commit_step(_commit([("c1", Q), ("c2", Q)], StepAfter.CONTINUE)),
        "claim_call": lambda s: s.claim_call(_claim(call)),
        "record_result": lambda s: s.record_result(result),
        "post_result": lambda s: s.post_result(PostResult(run_id=RUN, **fields)),
        "expire_parked": lambda s: s.expire_parked(ExpireParked(run_id=RUN, **fields)),
        "workflow_record": lambda s: s.workflow_record(
            WorkflowRecord(
                run_id=RUN,
                step=0,
                call_id=call,
                node="out",
                outcome=json.dumps({"status": "done", "output": 1}),
                events=[_event("tool-progress")],
                final=WorkflowFinal(
                    result=result.result, events=result.events, next_job=result.next_job
                ),
            )
        ),
        "approve": lambda s: s.resolve_approval(
            ResolveApproval(
                run_id=RUN,
                step=0,
                call_id=call,
                approved=True,
                event=_event("tool-approval-response"),
                next_status=CallStatus.QUEUED,
                job=tool_job(RUN, 0, _call(call, Q)),
            )
        ),
        "deny": lambda s: s.resolve_approval(
            ResolveApproval(
                run_id=RUN,
                step=0,
                call_id=call,
                approved=False,
                event=_event("tool-approval-response"),
                result=result.result,
                events=result.events,
                next_job=result.next_job,
            )
        ),
        "input_request": lambda s: s.input_request(
            input_request_args(
                RUN, 0, call_id=call, tool_name="t", request_id=REQUEST, message="?", schema={}
            )
        ),
        "input_answer": lambda s: s.input_answer(
            input_answer_args(
                RUN,
                0,
                request_id=REQUEST,
                call_id=call,
                outcome=InputStatus.ACCEPTED,
                content={"x": 1},
            )
        ),
        "redrive": lambda s: s.redrive(
            Redrive(
                run_id=RUN,
                step=0,
                model_job=model_job(RUN, 0),
                calls=[RedriveCall(id=i, job=tool_job(RUN, 0, _call(i, Q))) for i in ("c1", "c2")],
            )
        ),
        "start_queued": lambda s: s.start_queued(StartQueued(run_id=RUN, history=[])),
        "hold_step": lambda s: s.hold_step(
            HoldStep(run_id=RUN, step=0, scope="batch:t:b", event=_event("step-held"), recheck_ms=0)
        ),
        "emit": lambda s: s.append(Emit(run_id=RUN, events=[_event("tool-progress")])),
        "fail_run": lambda s: s.fail_run(RUN, FAILURE),
        "cancel": lambda s: s.cancel(RUN, "stop"),
        "cancel_at_step_end": lambda s: s.cancel(RUN, "stop", at_step_end=True),
    }
    return probes[name]


CALL_PROBES = (
    "claim_call",
    "record_result",
    "post_result",
    "expire_parked",
    "workflow_record",
    "approve",
    "deny",
    "input_request",
)
RUN_PROBES = (
    "create_same",
    "create_other",
    "begin_step",
    "commit_step",
    "input_answer",
    "redrive",
    "start_queued",
    "hold_step",
    "emit",
    "fail_run",
    "cancel",
    "cancel_at_step_end",
)
# (probe, call id): the call probes also name a call the step does not have.
PROBES = [(p, "c1") for p in RUN_PROBES + CALL_PROBES] + [(p, "c9") for p in CALL_PROBES]
TABLE = [
    pytest.param(state, probe, call, id=f"{name}-{probe}-{call}")
    for name, *state in STATES
    for probe, call in PROBES
]


# -- reading the resulting Redis state ---------------------------------------------------


@dataclass(frozen=True)
class Observed:
    status: str | None
    step: int
    pending: int
    parked: int
    c1: str | None
    request: str | None
    events: int
    jobs: int


async def _observe(redis: Redis) -> Observed:
    meta = await redis.hgetall(keys.meta(RUN))  # type: ignore[misc]
    step0 = await redis.hgetall(keys.step(RUN, 0))  # type: ignore[misc]

    def field(raw: dict[bytes, bytes], name: str) -> str | None:
        value = raw.get(name.encode())
        return value.decode() if value is not None else None

    jobs = 0
    async for _ in redis.scan_iter(match=keys.ARQ_JOB_PREFIX + "*"):
        jobs += 1
    return Observed(
        status=field(meta, MetaField.STATUS),
        step=int(field(meta, MetaField.STEP) or 0),
        pending=int(field(step0, StepField.PENDING) or 0),
        parked=int(field(step0, StepField.PARKED) or 0),
        c1=field(step0, StepField.CALL_STATUS + "c1"),
        request=field(step0, StepField.INPUT_STATUS + REQUEST),
        events=await redis.xlen(keys.events(RUN)),
        jobs=jobs,
    )


def _predicted(m: Model, before: Observed, events: int, jobs: int) -> Observed:
    return Observed(
        status=m.status,
        step=m.step,
        # A joined step keeps pending 0; a step never committed has none.
        pending=m.pending if m.committed else 0,
        parked=max(m.parked, 0) if m.committed else 0,
        c1=m.c1,
        request=m.request,
        events=before.events + events,
        jobs=before.jobs + jobs,
    )


# -- the table ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture(params=["embedded", "redis-server"])
async def redis(request: pytest.FixtureRequest) -> AsyncIterator[Redis]:
    if request.param == "embedded":
        url = f"memory://table-{uuid.uuid4().hex}"
    else:
        url = request.getfixturevalue("real_redis").url
    client = connect(url)
    await client.flushall()
    try:
        yield client
    finally:
        await client.aclose()
        forget_memory_server(url)


@pytest.mark.parametrize(("state", "probe", "call"), TABLE)
async def test_transition(redis: Redis, state: tuple[Build, Model], probe: str, call: str) -> None:
    build, model = state
    store = RunStore(redis)
    await build(store)
    before = await _observe(redis)
    assert before == _predicted(model, before, 0, 0), "the state was not built as modelled"

    first = expect(probe, model, call)
    second = expect(probe, first.model, call)  # the same transition delivered again
    replies = [await _probe(probe, call)(store), await _probe(probe, call)(store)]

    assert [r.outcome for r in replies] == [first.outcome, second.outcome]
    events, jobs = first.events + second.events, first.jobs + second.jobs
    assert await _observe(redis) == _predicted(second.model, before, events, jobs)


def test_the_table_covers_every_transition() -> None:
    from agentq.orchestrator.runs.state import INPUTS

    scripts = {m.script for m in INPUTS}
    probed = {"create", "emit", "fail_run", "cancel", "begin_step", "commit_step"}
    probed |= {"claim_call", "record_result", "post_result", "expire_parked"}
    probed |= {"resolve_approval", "input_request", "input_answer", "workflow_record"}
    probed |= {"redrive", "start_queued", "hold_step"}
    assert scripts == probed
    assert len(TABLE) == len(STATES) * len(PROBES)


# -- a cancel at the step's end ---------------------------------------------------------


async def test_a_cancel_at_step_end_lets_the_step_finish_and_starts_no_other(
    redis: Redis,
) -> None:
    store = RunStore(redis)
    for transition in _with_calls([("c1", Q), ("c2", Q)]):
        await transition(store)
    assert (await store.cancel(RUN, "new message", at_step_end=True)).outcome == Outcome.STOPPING
    assert (await store.record_result(_record("c1"))).outcome == Outcome.RECORDED
    # The last result joins the step: recorded, and the run ends instead of step 1.
    assert (await store.record_result(_record("c2"))).outcome == Outcome.FINISHED
    meta = await store.meta(RUN)
    assert meta[MetaField.STATUS] == RunStatus.CANCELLED
    assert meta[MetaField.STEP] == "0"
    assert await redis.hexists(keys.step(RUN, 0), StepField.RESULT + "c2")  # type: ignore[misc]


async def test_a_step_queued_before_a_cancel_at_step_end_never_begins(redis: Redis) -> None:
    store = RunStore(redis)
    await store.create(_create())
    assert (await store.cancel(RUN, "new message", at_step_end=True)).outcome == Outcome.STOPPING
    begun = await store.begin_step(BeginStep(run_id=RUN, step=0, event=_event("start-step")))
    assert begun.outcome == Outcome.CLOSED
    assert (await store.meta(RUN))[MetaField.STATUS] == RunStatus.CANCELLED
