"""The sweeper: re-drive a run whose current step lost its job.

A run moves only when a job moves it. If the job its step waits for is lost (a
failover dropped the write that queued it, or anything else removed it), and no
completion was recorded, nothing will ever drive the run again. Every worker sweeps
for such runs (workers/worker/runtime.py), beside the reaper.

The cost of a pass does not grow with the number of healthy runs (machine/sweeper.py):
each partition keeps its live runs in a sorted set scored by when each last moved
(written by the run transitions themselves, `moved` in runs/lua/prelude.lua; an ending
removes the run), and a pass reads only its stale window. Whether a stale run is stuck
is decided inside one transition (runs/lua/redrive.lua), which enqueues the step's jobs
again only where none is queued or held; a job that survived is never doubled, and a
run that waits for a human, a client or a child run is not woken.

A parked run stays watched, `PARKED_RECHECK` thresholds apart, while a parked call has
a job of its own that ends its wait: its deadline (`park_expiry`), the `start_call` of
its child run or workflow while neither exists, a workflow's node jobs in flight (those
its records enqueued whose node has recorded nothing; a node run as a child run, while
its child does not exist yet), and the child's end (a node's child's too)
(`child_ended`, enqueued on the child's own slot: the sweeper asks the ended child to
enqueue it again, as a batch's sweeper asks an ended run for its line's end job). A
wait on a human alone has none, and leaves the index until the run moves again.
"""

from __future__ import annotations

import json

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.keys import ARQ_IN_PROGRESS_PREFIX
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.core.run_ids import ParentLink, child_run_id
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.machine.store import resolved, text
from agentq.orchestrator.machine.sweeper import Sweeper
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.state import (
    PARKED_CALL_STATUSES,
    TERMINAL_STATUSES,
    CallStatus,
    MetaField,
    Outcome,
    Redrive,
    RedriveCall,
    StepField,
    call_field,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import expiry_job, model_job, start_job, tool_job
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.workflow import WorkflowToolConfig, node_job

# The statuses of a call whose job is the step's to drive (not parked, not done).
RUNNABLE = (CallStatus.QUEUED, CallStatus.RUNNING)
# A parked run's wait is long and usually legitimate: it is looked at this many times
# less often than a moving one.
PARKED_RECHECK = 10


class Redriver(Sweeper):
    def __init__(self, store: RunStore, *, after_s: float, limit: int) -> None:
        super().__init__(store.redis, keys.moving_runs, after_s=after_s, limit=limit)
        self.store = store
        self.recheck_ms = self.after_ms * (PARKED_RECHECK - 1)

    async def redrive(self, entry: str) -> int:
        """Enqueue again what the run's current step waits for and lost; how many jobs."""
        return (await self.redrive_run(entry))[1]

    async def redrive_run(self, entry: str) -> tuple[Outcome, int]:
        """`redrive`, with the transition's outcome (IN_HAND: nothing was lost)."""
        transition, ended_children = await self._read(entry)
        answer = await self.store.redrive(transition)
        jobs = answer.jobs if answer.outcome == Outcome.REDRIVEN else 0
        for child_id in ended_children:
            jobs += await self.redrive_ended(child_id)
        return answer.outcome, jobs

    async def redrive_ended(self, run_id: str) -> int:
        """An ended run whose end someone still waits on (its parent's call, its batch
        line): the jobs its end enqueued, again unless in hand; how many."""
        with redis_errors_mapped():
            raw_step = await resolved(self.redis.hget(keys.meta(run_id), MetaField.STEP))
        step = int(raw_step) if raw_step is not None else 0
        transition = Redrive(
            run_id=run_id, step=step, model_job=model_job(run_id, step), ended=True
        )
        answer = await self.store.redrive(transition)
        return answer.jobs if answer.outcome == Outcome.REDRIVEN else 0

    async def _read(self, run_id: str) -> tuple[Redrive, list[str]]:
        """The run's step and the jobs it may wait for, as read now (the transition
        checks them again, atomically); and the ended child runs its parked calls still
        wait on."""
        with redis_errors_mapped():
            raw_step = await resolved(self.redis.hget(keys.meta(run_id), MetaField.STEP))
            n = int(raw_step) if raw_step is not None else 0
            runnable, parked = await self._calls(run_id, n)
            owned, ended = await self._parked_jobs(run_id, n, parked)
        transition = Redrive(
            run_id=run_id,
            step=n,
            model_job=model_job(run_id, n),
            model_live=[
                *_held(keys.summary_job_id(run_id, n)),
                *_held(keys.resumed_model_job_id(run_id, n)),
                keys.batch_step(run_id, n),
            ],
            calls=[
                RedriveCall(id=plan.id, job=tool_job(run_id, n, plan))
                for plan in runnable
                if plan.queue is not None
            ],
            parked=owned,
            watched=any(_watched(plan) for plan in parked),
            recheck_ms=self.recheck_ms,
        )
        return transition, ended

    async def _calls(self, run_id: str, n: int) -> tuple[list[CallPlan], list[CallPlan]]:
        """Step n's runnable calls (queued or running) and its parked ones."""
        step_key = keys.step(run_id, n)
        order = await resolved(self.redis.hget(step_key, StepField.ORDER))
        ids = [str(i) for i in json.loads(order)] if order is not None else []
        if not ids:
            return [], []
        fields = [call_field(StepField.CALL_STATUS, i) for i in ids]
        statuses = await resolved(self.redis.hmget(step_key, fields))
        live = {i: text(st) for i, st in zip(ids, statuses, strict=True) if st is not None}
        wanted = [i for i, st in live.items() if st in RUNNABLE or st in PARKED_CALL_STATUSES]
        if not wanted:
            return [], []
        fields = [call_field(StepField.CALL, i) for i in wanted]
        plans = [
            CallPlan.model_validate_json(raw)
            for raw in await resolved(self.redis.hmget(step_key, fields))
            if raw is not None
        ]
        runnable = [p for p in plans if live[p.id] in RUNNABLE]
        return runnable, [p for p in plans if live[p.id] in PARKED_CALL_STATUSES]

    async def _parked_jobs(
        self, run_id: str, n: int, parked: list[CallPlan]
    ) -> tuple[list[RedriveCall], list[str]]:
        """The jobs of its own that end the parked calls' waits, and the ended children
        whose end may have lost its job to the parent."""
        owned: list[RedriveCall] = []
        ended: list[str] = []
        for plan in parked:
            if plan.park_timeout_s is not None:
                # Enqueued again, the deadline counts from now: a lost one is late, not gone.
                owned.append(RedriveCall(id=plan.id, job=expiry_job(run_id, n, plan)))
            if plan.start_queue is None:
                continue
            child_id = child_run_id(run_id, n, plan.id)
            status = await resolved(self.redis.hget(keys.meta(child_id), MetaField.STATUS))
            if status is not None:
                if text(status) in TERMINAL_STATUSES:
                    ended.append(child_id)
                continue
            recorded = await resolved(self.redis.hkeys(keys.workflow(run_id, n, plan.id)))
            if not recorded:
                # Nothing it starts exists yet (no child run, no workflow node recorded).
                owned.append(RedriveCall(id=plan.id, job=start_job(run_id, n, plan)))
                continue
            nodes, ended_nodes = await self._nodes_in_flight(
                run_id, n, plan, {text(r) for r in recorded}
            )
            owned += [RedriveCall(id=plan.id, job=job) for job in nodes]
            ended += ended_nodes
        return owned, ended

    async def _nodes_in_flight(
        self, run_id: str, n: int, plan: CallPlan, recorded: set[str]
    ) -> tuple[list[QueuedJob], list[str]]:
        """A workflow call's node jobs that its records enqueued and that have recorded
        nothing yet; and the ended child runs of its nodes that run as one, whose end may
        have lost its job (a node whose child still runs waits on that child alone)."""
        raw = await self.store.tool_def(run_id, plan.name)
        tool = ToolDef.model_validate_json(raw) if raw else None
        if tool is None or not isinstance(tool.config, WorkflowToolConfig):
            return [], []
        jobs: list[QueuedJob] = []
        ended: list[str] = []
        for node in tool.config.graph.in_flight(recorded):
            if node in tool.config.children:
                link = ParentLink(run_id=run_id, step=n, call_id=plan.id, node=node)
                status = await resolved(self.redis.hget(keys.meta(link.child_id), MetaField.STATUS))
                if status is not None:
                    if text(status) in TERMINAL_STATUSES:
                        ended.append(link.child_id)
                    continue
            jobs.append(node_job(run_id, n, plan.id, node, tool.config))
        return jobs, ended


def _held(job_id: str) -> list[str]:
    """The keys that say a job is queued (its arq key) or held (its in-progress key)."""
    return [keys.arq_job(job_id), ARQ_IN_PROGRESS_PREFIX + job_id]


def _watched(plan: CallPlan) -> bool:
    """Whether a parked call has a job of its run's that ends its wait (see module doc)."""
    return plan.park_timeout_s is not None or plan.start_queue is not None
