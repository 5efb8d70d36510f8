"""The worker side of sub-agents: start a parked `agent` call's child run, forward the
child's progress to the parent's call, and answer that call when the child ends.

Neither job holds a slot while the child runs: `start_call` creates the child and
returns; the child's end-of-run transition enqueues `child_ended` atomically
(orchestrator/runs/children.py), which posts the child's answer through `post_result`,
write-once, so a re-delivered job answers nothing twice. Refusals (depth, fan-out, a
child spec the deployment rejects) are tool errors the parent's model sees.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from agentq.orchestrator import tracing
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import JobEnvelope
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.fairness import batch_key
from agentq.orchestrator.core.messages import ToolResultPart, Usage
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT, ParentLink, child_run_id
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.templating import TemplateError
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.loop.plan import CallPlan, StepPlan, error_result
from agentq.orchestrator.runs.children import ChildOf, child_spec
from agentq.orchestrator.runs.result_guards import Ask, guarded_result
from agentq.orchestrator.runs.state import (
    TERMINAL_STATUSES,
    CallStatus,
    MetaField,
    PostResult,
    Reply,
    RunFailure,
    rolled_up_usage,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import result_args
from agentq.orchestrator.spec.limits import Limit, RunLimits, limit_in_force
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.agent import AgentToolConfig
from agentq.orchestrator.tools.workflow import WorkflowToolConfig


async def answer_parked(
    store: RunStore,
    run_id: str,
    step: int,
    result: ToolResultPart,
    child_usage: Usage | None = None,
) -> Reply:
    """Post a parked call's result (a refusal, a child's answer, a workflow's output)."""
    args = result_args(run_id, step, result, completion=PostResult)
    if child_usage is not None:
        args = args.model_copy(update={"child_usage": child_usage})
    return await store.post_result(args)


async def progress(store: RunStore, parent: ParentLink, tool_name: str, output: Any) -> None:
    """A `tool-progress` event on the parent's call (dropped when the parent has ended)."""
    await store.emit(
        parent.run_id,
        [
            event_json(
                "tool-progress",
                parent.run_id,
                step=parent.step,
                tool_call_id=parent.call_id,
                tool_name=tool_name,
                output=output,
            )
        ],
    )


async def start_child(store: RunStore, settings: Settings, envelope: JobEnvelope) -> Reply | None:
    """Start the child run of a parked agent call (idempotent: the child's id derives from
    the call). Returns the reply of an answer posted instead (a refusal), else None."""
    run_id, step, call_id = envelope.run_id, envelope.step, envelope.call_id or ""
    meta = await store.meta(run_id)
    if meta[MetaField.STATUS] in TERMINAL_STATUSES:
        return None
    call_json, status = await store.call_state(run_id, step, call_id)
    if call_json is None or status != CallStatus.AWAITING_RESULT:
        return None  # answered already (a re-delivered job), or the run moved on
    call = CallPlan.model_validate_json(call_json)
    tool_json = await store.tool_def(run_id, call.name)
    tool = ToolDef.model_validate_json(tool_json) if tool_json else None
    if tool is None or not isinstance(tool.config, AgentToolConfig):
        return await _refuse(store, run_id, step, call, "is not an agent tool of this run")
    link = ParentLink(run_id=run_id, step=step, call_id=call_id)
    rank = await _agent_call_rank(store, run_id, step, call_id)
    if rank >= settings.max_agent_fanout:
        return await _refuse(
            store,
            run_id,
            step,
            call,
            f"is sub-agent call number {rank + 1} of this step; this deployment allows "
            f"{settings.max_agent_fanout} per step (AGENTQ_MAX_AGENT_FANOUT)",
        )
    template = tool.config.spec
    refusal = await open_child(
        store, settings, meta, link, lambda limits: child_spec(template, call.input, limits)
    )
    return None if refusal is None else await _refuse(store, run_id, step, call, refusal)


async def open_child(
    store: RunStore,
    settings: Settings,
    meta: dict[str, str],
    link: ParentLink,
    spec_of: Callable[[RunLimits], dict[str, Any]],
) -> str | None:
    """Create the child run `link` names (its parent's `meta`; `spec_of` builds its spec
    from the limits it inherits) within the deployment's depth, tree and submit-rate
    limits; why it was not, or None. A child created already (a re-delivered job) is
    not created twice; one whose parent ended meanwhile is cancelled."""
    depth = int(meta.get(MetaField.DEPTH, "0")) + 1
    if depth > settings.max_agent_depth:
        return (
            f"would nest sub-agents {depth} deep; this deployment allows "
            f"{settings.max_agent_depth} (AGENTQ_MAX_AGENT_DEPTH)"
        )
    limits = RunLimits.model_validate(json.loads(meta[MetaField.SPEC]).get("limits") or {})
    tree_runs = await store.join_tree(link.child_id)
    most = limit_in_force(limits, settings, "max_tree_runs")
    if tree_runs > most.value:
        return f"would make its run tree {tree_runs} runs; {most.allows()}"
    client = Client(redis=store.redis, settings=settings)
    tenant = meta.get("tenant") or DEFAULT_TENANT
    refusal = await _over_submit_rate(client, store, link.child_id, tenant)
    if refusal is not None:
        return refusal
    try:
        child_id, _ = await client.runs.create(
            spec_of(limits),
            tenant=meta.get("tenant"),
            child_of=ChildOf(parent=link, depth=depth),
            # A batch line's sub-agents spend the batch's budget too, and take its turns.
            batch=meta.get(MetaField.BATCH),
            batch_weight=_batch_weight(meta),
        )
    except TemplateError as exc:
        return f"cannot fill in its spec: {exc}"
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(spec)"
        return f"has an invalid spec: {where}: {first['msg']}"
    except SpecError as exc:
        return f"was refused: {exc.message}"
    if (await store.meta(link.run_id))[MetaField.STATUS] in TERMINAL_STATUSES:
        await client.runs.cancel(child_id, f"its parent run {link.run_id} has ended")
    return None


async def tree_step_refusal(
    store: RunStore,
    most: Limit,
    run_id: str,
    step: int,
    tools: list[ToolDef],
    parent: str | None,
) -> str | None:
    """Count a model step in its run tree; why it may not be taken, past `most`.

    A run with no parent and no tool that starts child runs (an agent, a workflow with
    llm nodes that use tools) is a tree of one: its steps so far are its own, so it is
    checked without a round trip to Redis."""
    if parent is None and not any(_starts_children(t) for t in tools):
        steps = step + 1
    else:
        steps = await store.count_tree_step(run_id, step)
    if steps <= most.value:
        return None
    return f"its run tree would take {steps} model steps; {most.allows()}"


def _batch_weight(meta: dict[str, str]) -> int:
    """The weight a batch line's sub-agent waits at under its batch's key: the batch's
    priority, which the parent holds when it waits there too (its spec named no key)."""
    batch = meta.get(MetaField.BATCH)
    if batch is None or meta.get(MetaField.FAIR_KEY) != batch_key(batch):
        return 1
    return int(meta.get(MetaField.FAIR_WEIGHT, "1"))


def _starts_children(tool: ToolDef) -> bool:
    config = tool.config
    return isinstance(config, AgentToolConfig) or (
        isinstance(config, WorkflowToolConfig) and bool(config.children)
    )


async def _over_submit_rate(
    client: Client, store: RunStore, child_id: str, tenant: str
) -> str | None:
    """A child is a submission of its tenant's: it spends the tenant's submit rate (the
    window `agentq serve` counts in) as a run the tenant submitted would, and past it is
    refused. A child that exists already (a re-delivered job) was counted when created."""
    if await store.exists(child_id):
        return None
    window = await client.runs.count_submission(tenant)
    per_minute = client.settings.submits_per_minute
    if window.count <= per_minute:
        return None
    return (
        f"was refused: tenant {tenant!r} is over its submit rate ({per_minute} a minute, "
        f"AGENTQ_SUBMITS_PER_MINUTE); retry after {window.retry_after_s} s"
    )


async def _refuse(store: RunStore, run_id: str, step: int, call: CallPlan, why: str) -> Reply:
    message = f"The sub-agent {call.name!r} {why}."
    return await answer_parked(
        store, run_id, step, error_result(call.id, call.name, message, ToolErrorKind.EXECUTION)
    )


async def _agent_call_rank(store: RunStore, run_id: str, step: int, call_id: str) -> int:
    """How many agent calls come before this one in the step (the fan-out so far)."""
    children = await store.agent_children(run_id)
    mine = child_run_id(run_id, step, call_id)
    return children.index(mine) if mine in children else 0


def child_result(
    child_id: str, meta: dict[str, str], link: ParentLink, tool_name: str
) -> ToolResultPart:
    """The parent's call's answer: a child that asked for a structured output answers
    with it (the parent's model gets the typed value, not the JSON's text), else with
    its final text; a failed or cancelled child is a tool error."""
    status = meta[MetaField.STATUS]
    if status == "succeeded":
        answer = (
            json.loads(meta[MetaField.OUTPUT])
            if MetaField.OUTPUT in meta
            else meta.get(MetaField.TEXT, "")
        )
        return ToolResultPart(tool_call_id=link.call_id, tool_name=tool_name, output=answer)
    if status == "failed":
        failure = RunFailure.model_validate_json(meta[MetaField.ERROR])
        why, kind = f"failed: {failure.message}", ToolErrorKind.EXECUTION
    else:
        why, kind = "was cancelled", ToolErrorKind.CANCELLED
    return error_result(link.call_id, tool_name, f"The sub-agent run {child_id} {why}.", kind)


def parent_of(meta: dict[str, str]) -> ParentLink | None:
    """The parent's call (or workflow node) a child run answers; None: not a child."""
    if MetaField.PARENT not in meta:
        return None
    return ParentLink.model_validate_json(meta[MetaField.PARENT])


async def child_ended(
    store: RunStore, child_id: str, meta: dict[str, str], link: ParentLink, ask: Ask
) -> Reply | None:
    """The child run has ended: answer its parent's call (a no-op when answered), its
    answer guarded as any tool's result is (`ask`: how this worker calls a guard)."""
    call_json, _ = await store.call_state(link.run_id, link.step, link.call_id)
    if call_json is None:
        return None
    name = CallPlan.model_validate_json(call_json).name
    result = child_result(child_id, meta, link, name)
    tracing.record_parked_call(
        link.run_id,
        link.call_id,
        name,
        float(meta.get(MetaField.CREATED_AT, "0")),
        str(result.output) if result.is_error else None,
    )
    await progress(store, link, name, {"child_run_id": child_id, "status": meta[MetaField.STATUS]})
    tool_json = await store.tool_def(link.run_id, name)
    tool = ToolDef.model_validate_json(tool_json) if tool_json else None
    result = await guarded_result(store, link.run_id, link.step, tool, result, ask)
    return await answer_parked(store, link.run_id, link.step, result, rolled_up_usage(meta))


def step_shown(plan: StepPlan) -> dict[str, Any]:
    """What the parent's call shows of a child's committed step: its text, its calls."""
    shown: dict[str, Any] = {"step": plan.step}
    if plan.text:
        shown["text"] = plan.text
    if plan.calls:
        shown["tool_calls"] = [{"name": c.name, "input": c.input} for c in plan.calls]
    return shown


async def forward_step(
    store: RunStore, parent_json: str, child_id: str, data: dict[str, Any]
) -> None:
    """A child's step progress (step start, tool calls, text) on its parent's call."""
    link = ParentLink.model_validate_json(parent_json)
    call_json, _ = await store.call_state(link.run_id, link.step, link.call_id)
    if call_json is None:
        return
    name = CallPlan.model_validate_json(call_json).name
    node = {"node": link.node} if link.node is not None else {}
    await progress(store, link, name, {**node, "child_run_id": child_id, **data})
