"""The worker side of a model step, in named phases (workers/jobs/model_step.py runs them
in order): begin, guard the input (step 0), prepare, request, generate, repair, plan
(the output guarded when the run ends), commit.

A phase that ends the step early (skipped, deferred for a summary, parked for a
provider batch, failed) returns None; the job stops there. Every phase is idempotent
under re-delivery: `begin` and `commit` are transitions a second delivery finds applied.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from opentelemetry.trace import Span

from agentq.orchestrator import tracing
from agentq.orchestrator.budgets.ledger import BudgetLedger
from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.expression_limits import ExpressionLimitError
from agentq.orchestrator.core.messages import Message, Usage
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.loop.budget import budget_failure, over_budget
from agentq.orchestrator.loop.plan import StepPlan, offered_tools, plan_step
from agentq.orchestrator.machine.store import Ride
from agentq.orchestrator.output.instructions import (
    OUTPUT_TOOL,
    OUTPUT_TOOL_DESCRIPTION,
    prompted_system,
)
from agentq.orchestrator.output.judge import StepOutput, attempts_in
from agentq.orchestrator.output.spec import effective_mode
from agentq.orchestrator.policy.budgets import Budget, Reached, Spent
from agentq.orchestrator.policy.caching import CacheScope
from agentq.orchestrator.policy.guardrails import Trip
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.runs.ended import run_ended
from agentq.orchestrator.runs.state import BeginStep, FailureKind, Outcome, RunFailure
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import commit_args, enqueued_job_ids
from agentq.orchestrator.spec.limits import budget_in_force, limit_in_force
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.provider import ProviderToolConfig
from agentq.workers.models import ModelRequest, ModelResponse, OfferedTool
from agentq.workers.models.batch.step import Route, batch_answer
from agentq.workers.models.batch.store import ProviderBatchStore
from agentq.workers.models.gemini_cache import explicit as gemini_cache
from agentq.workers.models.model_client import ModelClient
from agentq.workers.queue.outcome import JobOutcome, report
from agentq.workers.steps import answers, budgets, guards
from agentq.workers.steps import prepare as preparation
from agentq.workers.steps.history_cache import HistoryCache, asking, completed
from agentq.workers.steps.repair import repair_calls
from agentq.workers.steps.sink import DeltaEvents
from agentq.workers.tools import agent as sub_agents

log = logging.getLogger("agentq.worker")


class ModelCallMetrics(Protocol):
    """What a step reports of its run and model calls (the worker's Prometheus metrics)."""

    def observe_model_call(
        self, provider: str, model: str, call: Awaitable[ModelResponse]
    ) -> Awaitable[ModelResponse]: ...

    def observe_cost(self, tenant: str, provider: str, model: str, usage: Usage) -> None: ...

    def observe_run_started(self, tenant: str) -> None: ...


class StepDeps(Protocol):
    """What the phases use of the worker (workers/jobs/base.py's WorkerDeps)."""

    @property
    def store(self) -> RunStore: ...
    @property
    def models(self) -> ModelClient: ...
    @property
    def histories(self) -> HistoryCache: ...
    @property
    def batches(self) -> ProviderBatchStore | None: ...
    @property
    def metrics(self) -> ModelCallMetrics | None: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def budgets(self) -> BudgetLedger: ...


@dataclass(frozen=True)
class Begun:
    """A step begun: the run's whole history as this worker holds it."""

    run_id: str
    step: int
    spec: RunSpec
    tools: list[ToolDef]
    messages: list[Message]
    digest: str
    parent: str | None  # a sub-agent's child run: its parent's call shows its progress
    tenant: str  # whose run it is (what its cost counts to)
    # The run's budgets in force and what it had spent before this step (None: no
    # budget); `last`: the budget reached that makes this its last step, tools disabled.
    budget: Budget | None = None
    spent: Spent | None = None
    last: Reached | None = None


@dataclass(frozen=True)
class Generated:
    response: ModelResponse
    batched: bool  # answered through a provider batch


async def fail(deps: StepDeps, run_id: str, failure: RunFailure) -> None:
    """Fail the run (a step that cannot go on), ending its span when that ended it."""
    report(JobOutcome.FAILED)
    failed = await deps.store.fail_run(run_id, failure)
    if failed.outcome in (Outcome.FINISHED, Outcome.FAILED):
        await run_ended(deps.store, run_id)


async def begin(deps: StepDeps, run_id: str, step: int, attempt: int) -> Begun | None:
    """Start the step (begin_step.lua), reading only the history this worker lacks; a
    step past its run tree's limit or its run's budget fails the run instead, and one
    whose batch's or tenant's shared budget is reached is held, before the model is
    asked."""
    held = deps.histories.get(run_id)
    start = BeginStep(
        run_id=run_id,
        step=step,
        event=event_json("start-step", run_id, step=step, attempt=attempt),
    )
    begun = await deps.store.begin_step(asking(held, start))
    if begun.outcome != Outcome.OK:
        log.debug("model step %s/%d skipped: %s", run_id, step, begun.outcome)
        return None
    if step == 0 and attempt == 1 and deps.metrics is not None:
        deps.metrics.observe_run_started(begun.tenant or DEFAULT_TENANT)
    whole = completed(held, begun)
    deps.histories.put(run_id, whole)
    most = limit_in_force(whole.spec.limits, deps.settings, "max_tree_steps")
    refusal = await sub_agents.tree_step_refusal(
        deps.store, most, run_id, step, list(whole.tools), begun.parent
    )
    if refusal is not None:
        await fail(deps, run_id, RunFailure(kind=FailureKind.LIMIT, message=refusal, step=step))
        return None
    budget = budget_in_force(whole.spec.limits, deps.settings)
    spent = last = None
    if not budget.empty:
        spent = await budgets.run_spent(deps.store, run_id)
        last = budget.before_step(spent)
        if last is not None and whole.spec.limits.on_limit == "fail":
            await fail(deps, run_id, budget_failure(last, step))
            return None
    tenant = begun.tenant or DEFAULT_TENANT
    if await budgets.held_by_shared(
        deps.budgets, deps.store, deps.settings, run_id, step, tenant, begun.batch
    ):
        return None
    return Begun(
        run_id=run_id,
        step=step,
        spec=whole.spec,
        tools=list(whole.tools),
        messages=list(whole.messages),
        digest=whole.digest,
        parent=begun.parent,
        tenant=tenant,
        budget=None if budget.empty else budget,
        spent=spent,
        last=last,
    )


async def prepare(
    deps: StepDeps, begun: Begun, *, resumed: bool
) -> preparation.PreparedStep | None:
    """prepareStep and context management (workers/steps/prepare.py)."""
    try:
        prepared = await preparation.prepare(
            deps.store,
            deps.models,
            begun.run_id,
            begun.step,
            begun.spec,
            begun.tools,
            begun.messages,
            resumed=resumed,
            history_digest=begun.digest,
        )
    except preparation.StepDeferred:
        return None  # its context summary is written first (workers/jobs/summarize.py)
    except preparation.StepPreparationFailed as exc:
        failure = RunFailure(kind=exc.kind, message=exc.message, step=begun.step)
        await fail(deps, begun.run_id, failure)
        return None
    if begun.parent:
        # The child says it started itself, before its first step: the job that created
        # it may be overtaken by this one, and the parent's call shows them in order.
        if begun.step == 0:
            started = {"status": "started"}
            await sub_agents.forward_step(deps.store, begun.parent, begun.run_id, started)
        await sub_agents.forward_step(deps.store, begun.parent, begun.run_id, {"step": begun.step})
    if begun.last is not None:
        # The budget's last step: the model answers with what it has, no tool offered.
        last = prepared.spec.model_copy(update={"tool_choice": "none"})
        return dataclasses.replace(prepared, spec=last)
    return prepared


def output(deps: StepDeps, begun: Begun, prepared: preparation.PreparedStep) -> StepOutput | None:
    """The structured output the step asks for, in the mode its endpoint takes."""
    spec = prepared.spec.output
    if spec is None:
        return None
    native = deps.models.native_output(prepared.spec.model)
    return StepOutput(
        spec=spec, mode=effective_mode(spec.mode, native), attempts=attempts_in(begun.messages)
    )


def batch_of(spec: RunSpec) -> str | None:
    """The batch the run is a line of: its upload sets `metadata.batch` over the line's own
    (a lone run naming one shares nothing beyond its tenant's namespace)."""
    batch = spec.metadata.get("batch")
    return batch if isinstance(batch, str) else None


def request(
    begun: Begun, prepared: preparation.PreparedStep, output: StepOutput | None = None
) -> ModelRequest:
    """What the model is asked: the prepared messages, the tools offered, and the output
    the run wants (the schema in the system prompt, a final-answer tool, or the
    provider's response format)."""
    spec = prepared.spec
    tools = [
        OfferedTool(
            name=t.name,
            description=t.description,
            input_schema=t.input_schema,
            provider_executed=isinstance(t.config, ProviderToolConfig),
            options=t.config.options if isinstance(t.config, ProviderToolConfig) else {},
        )
        for t in offered_tools(spec, begun.tools)
    ]
    system, tool_choice = spec.system, spec.tool_choice
    if output is not None and output.mode == "prompted":
        system = prompted_system(system, output.spec.schema_)
    if output is not None and output.mode == "tool":
        tools.append(
            OfferedTool(
                name=OUTPUT_TOOL,
                description=OUTPUT_TOOL_DESCRIPTION,
                input_schema=output.spec.schema_,
            )
        )
        # The run ends only by a call: an answer in prose is never the output.
        tool_choice = "required" if tool_choice in ("auto", "none") else tool_choice
    return ModelRequest(
        model=spec.model,
        system=system,
        messages=prepared.messages,
        tools=tools,
        tool_choice=tool_choice,
        step=begun.step,
        timeout_s=spec.model.timeout_s,
        output_schema=output.native_schema if output is not None else None,
        cache_scope=CacheScope(tenant=begun.tenant, run=begun.run_id, batch=batch_of(spec)),
    )


async def generate(
    deps: StepDeps,
    spec: RunSpec,
    request: ModelRequest,
    sink: DeltaEvents,
    chat_span: Span,
) -> Generated | None:
    """The model's answer: from the provider directly, or through a provider batch (the
    step parks until a collector brings it). A provider's error fails the run. The
    stream's last deltas stay in `sink` (or go when its window ends): the commit writes
    them with the step, and whatever writes to the run before it flushes them first."""
    try:
        batched = await _batch_route(deps, spec, request, sink)
        if batched is Route.PARK:
            log.debug("model step %s/%d parked for a provider batch", sink.run_id, sink.step)
            tracing.annotate(chat_span, lambda: {"agentq.provider_batch": "parked"})
            return None
        if batched is Route.DIRECT:
            # A batch's line may name its batch's Gemini cached content (gemini_cache/).
            attached = await gemini_cache.attach(deps.models, deps.store.redis, request)
            call: Awaitable[ModelResponse] = deps.models.generate(attached.request, sink)
            metrics = deps.metrics
            if metrics is not None:
                call = metrics.observe_model_call(request.model.provider, request.model.name, call)
            response = await call
            usage = attached.charged(response.usage)
            if usage is not response.usage:  # a cached content's creation, billed here
                response = response.model_copy(update={"usage": usage})
        else:
            response = batched
            tracing.annotate(chat_span, lambda: {"agentq.provider_batch": "answered"})
    except ProviderError as exc:
        tracing.record_exception(exc, str(exc.status) if exc.status else None)
        await sink.flush()
        failure = RunFailure(
            kind=FailureKind.PROVIDER, message=exc.message, status=exc.status, step=sink.step
        )
        await fail(deps, sink.run_id, failure)
        return None
    return Generated(response, batched=not isinstance(batched, Route))


async def _batch_route(
    deps: StepDeps, spec: RunSpec, request: ModelRequest, sink: DeltaEvents
) -> ModelResponse | Route:
    """A `"batch": true` step parks its request, or takes the answer a collector brought
    (workers/models/batch/); every other step calls the model directly."""
    if not spec.model.batch or deps.batches is None:
        return Route.DIRECT
    return await batch_answer(deps.batches, deps.models, request, sink.run_id, sink.step, sink)


def price(
    deps: StepDeps, spec: RunSpec, response: ModelResponse, *, batched: bool
) -> ModelResponse:
    """The answer's usage with its cost at the deployment's prices."""
    return deps.models.priced(spec.model, response, batch=batched)


async def repair(
    deps: StepDeps,
    begun: Begun,
    spec: RunSpec,
    request: ModelRequest,
    response: ModelResponse,
    sink: DeltaEvents,
) -> ModelResponse:
    """Calls the model got wrong, asked again (workers/steps/repair.py)."""
    if spec.model.repair is not None:
        await sink.flush()  # the deltas come before the repairs' events
    return await repair_calls(
        spec=spec,
        tools=begun.tools,
        request=request,
        response=response,
        generate=deps.models.generate,
        store=deps.store,
        run_id=begun.run_id,
    )


async def plan(
    deps: StepDeps,
    begun: Begun,
    prepared: preparation.PreparedStep,
    response: ModelResponse,
    sink: DeltaEvents,
    output: StepOutput | None = None,
) -> StepPlan | None:
    """What the answer means for the run (pure: orchestrator/loop/plan.py), with what the
    stop conditions need gathered first (workers/steps/answers.py). `output`: the
    structured output the run asks for (None: its answer is its text); `sink`: the
    step's deltas not written yet, written before a failure."""
    spec = prepared.spec
    try:
        gathered = await answers.gather(
            deps.store, begun.run_id, begun.step, spec, begun.tools, response
        )
    except preparation.StepPreparationFailed as exc:
        failure = RunFailure(kind=exc.kind, message=exc.message, step=begun.step)
        await sink.flush()
        await fail(deps, begun.run_id, failure)
        return None
    try:
        planned = plan_step(spec, begun.tools, begun.step, response, gathered, output)
    except ExpressionLimitError as exc:
        # The spec's own pattern or rule (a stop condition, an approval rule) ran past
        # its bounds: the spec's limit is reached, the worker moves on.
        failure = RunFailure(kind=FailureKind.LIMIT, message=exc.message, step=begun.step)
        await sink.flush()
        await fail(deps, begun.run_id, failure)
        return None
    planned.prepared = prepared.record
    if begun.budget is not None and begun.spent is not None:
        reached = begun.last or begun.budget.after_step(begun.spent, budgets.step_spent(planned))
        if reached is not None:
            on_limit = spec.limits.on_limit
            planned.budget_failure = over_budget(
                planned, reached, on_limit, last=begun.last is not None
            )
    trip = guards.output_trip(deps.store, begun.run_id, spec, planned)
    if not await _passes(deps, begun, trip, sink):
        return None
    return planned


async def guard_input(deps: StepDeps, begun: Begun) -> bool:
    """The run's input guards, before step 0's model call (workers/steps/guards.py);
    False when the run failed instead."""
    trip = guards.input_trip(deps.store, begun.run_id, begun.step, begun.spec, begun.messages)
    return await _passes(deps, begun, trip)


async def _passes(
    deps: StepDeps, begun: Begun, asked: Awaitable[Trip | None], sink: DeltaEvents | None = None
) -> bool:
    """Whether the guards let the run go on; a trip fails it `guardrail-tripped`, a
    guard that cannot answer as any hook (`hook`), after the step's deltas (`sink`)."""
    try:
        trip = await asked
    except preparation.StepPreparationFailed as exc:
        failure = RunFailure(kind=exc.kind, message=exc.message, step=begun.step)
    else:
        if trip is None:
            return True
        failure = RunFailure(
            kind=FailureKind.GUARDRAIL_TRIPPED, message=trip.message, step=begun.step
        )
    if sink is not None:
        await sink.flush()
    await fail(deps, begun.run_id, failure)
    return False


# The commit outcomes that recorded the step (and added its usage to the totals).
_RECORDED = frozenset({Outcome.COMMITTED, Outcome.CONTINUED, Outcome.FINISHED, Outcome.FAILED})


async def commit(
    deps: StepDeps,
    begun: Begun,
    planned: StepPlan,
    *,
    model: ModelRef,
    batched: bool,
    ride: Ride | None,
    sink: DeltaEvents,
) -> None:
    """Record the step and enqueue what comes next (commit_step.lua); `model`: the one the
    step asked (its cost is counted under it); `ride`: the job's end, sent in the same
    round trip; `sink`: the step's last deltas, written by the commit before its events
    (no round trip of their own)."""
    run_id = begun.run_id
    if planned.output_failure is not None:
        await sink.flush()
        invalid = planned.output_failure
        failure = RunFailure(
            kind=FailureKind.OUTPUT_INVALID,
            message=invalid.message,
            step=begun.step,
            attempt=invalid.attempt,
        )
        await fail(deps, run_id, failure)
        return
    if begun.parent:
        # Before the commit: a commit that ends the child enqueues the job that shows its
        # end on the parent's call, which must come after this step.
        await sub_agents.forward_step(
            deps.store, begun.parent, run_id, sub_agents.step_shown(planned)
        )
    hops = tracing.Hops(run_id)
    args = hops.stamp(commit_args(run_id, planned))
    if batched:
        args = args.model_copy(update={"batch": True})
    windows, window_ttl_s = deps.budgets.windows(begun.tenant)
    if windows:
        args = args.model_copy(update={"windows": windows, "window_ttl_s": window_ttl_s})
    # Taken last: a window that ends before this is written on its own, in its order.
    if deltas := await sink.take():
        args = args.model_copy(update={"events": deltas + args.events})
    committed = await deps.store.commit_step(args, ride=ride)
    hops.sent(enqueued_job_ids(args, committed.outcome))
    if deps.metrics is not None and committed.outcome in _RECORDED:
        deps.metrics.observe_cost(begun.tenant, model.provider, model.name, planned.usage)
    if committed.outcome in (Outcome.FINISHED, Outcome.FAILED):
        deps.histories.drop(run_id)  # no step of the run comes next
    if committed.outcome in (Outcome.FINISHED, Outcome.FAILED):
        await run_ended(deps.store, run_id)
