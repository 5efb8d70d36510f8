"""The worker side of workflow tools: each node of a parked workflow call is a job.

`start_workflow` records the input node (the call's input); every record is one
`workflow_record` transition that writes the node's outcome once and enqueues each
successor whose predecessors all have outcomes, so independent branches run in parallel
on any workers and a join node runs once. A node job that finds its outcome written (a
re-delivery) records it again: the transition answers DUPLICATE and re-enqueues the
successors, a no-op when they were. The output node's value, or the first failing
node's error (naming the node), answers the call.

An llm node with tools is a child run of the call's run (the run's own loop: each model
step and tool call a job, parked calls, limits, cancellation): its job starts the child
and records nothing; the child's end (`child_ended`, or the node's job again, as the
sweeper re-sends it) records its answer as the node's outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from agentq.orchestrator.core.envelopes import JobEnvelope
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.messages import ToolResultPart, Usage, UserMessage
from agentq.orchestrator.core.run_ids import ParentLink
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.templating import TemplateError, render
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.core.tool_output import progress_value
from agentq.orchestrator.loop.plan import CallPlan, error_result, parse_arguments, validate_input
from agentq.orchestrator.output.validation import schema_problems
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.orchestrator.runs.children import node_call_spec, node_child_spec
from agentq.orchestrator.runs.state import (
    TERMINAL_STATUSES,
    CallStatus,
    MetaField,
    NodeCandidate,
    QueuedJob,
    Reply,
    WorkflowFinal,
    WorkflowRecord,
    rolled_up_usage,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import model_job, result_events
from agentq.orchestrator.spec.limits import RunLimits
from agentq.orchestrator.spec.run import ToolChoiceTool
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.workflow import NODE_CALL_ID, WorkflowToolConfig, node_job
from agentq.orchestrator.tools.workflow_graph import (
    NodeOutcome,
    WorkflowNode,
    evaluate_condition,
    is_active,
    values,
)
from agentq.workers.models import ModelRequest, OfferedTool
from agentq.workers.models.base import DiscardDeltas
from agentq.workers.models.model_client import ModelClient
from agentq.workers.tools import agent as sub_agents
from agentq.workers.tools.base import ToolExecutor
from agentq.workers.tools.context import ToolContext

# The tool an llm node with an output schema offers: its input is the structured output.
RESPOND_TOOL = "respond"


class WorkflowCall:
    """One workflow call as its node jobs see it."""

    def __init__(self, run_id: str, step: int, call: CallPlan, config: WorkflowToolConfig) -> None:
        self.run_id, self.step, self.call, self.config = run_id, step, call, config
        self.graph = config.graph

    def node_job(self, node: str) -> QueuedJob:
        return node_job(self.run_id, self.step, self.call.id, node, self.config)

    def progress(self, output: dict[str, Any]) -> str:
        return event_json(
            "tool-progress",
            self.run_id,
            step=self.step,
            tool_call_id=self.call.id,
            tool_name=self.call.name,
            output=output,
        )

    def record(
        self, node: str, outcome: NodeOutcome, known: dict[str, NodeOutcome] | None = None
    ) -> WorkflowRecord:
        """The transition writing the node's outcome; `known`: the outcomes before it."""
        shown: dict[str, Any] = {"node": node, "status": outcome.status}
        # What the node gave, as better-chatbot's NODE_END carries it, so a viewer shows
        # each node's value as it lands; capped as any progress value (the stored outcome
        # keeps the whole of it).
        if outcome.status == "done":
            shown["output"] = progress_value(outcome.output)
        if outcome.error is not None:
            shown["error"] = progress_value(outcome.error)
        candidates = [
            NodeCandidate(job=self.node_job(succ), needs=[e.source for e in self.graph.preds(succ)])
            for succ in self.graph.succs(node)
        ]
        return WorkflowRecord(
            run_id=self.run_id,
            step=self.step,
            call_id=self.call.id,
            node=node,
            outcome=outcome.model_dump_json(exclude_none=True),
            events=[self.progress(shown)],
            candidates=[] if outcome.status == "failed" else candidates,
            final=self._final(node, outcome, {**(known or {}), node: outcome}),
        )

    def _final(
        self, node: str, outcome: NodeOutcome, known: dict[str, NodeOutcome]
    ) -> WorkflowFinal | None:
        result: ToolResultPart | None = None
        name, call_id = self.call.name, self.call.id
        if outcome.status == "failed":
            message = f"The workflow node {node!r} failed: {outcome.error}"
            result = error_result(call_id, name, message, ToolErrorKind.EXECUTION)
        elif node == self.graph.output_node.id:
            if outcome.status == "skipped":
                message = f"The workflow ended without reaching its output node {node!r}."
                result = error_result(call_id, name, message, ToolErrorKind.EXECUTION)
            else:
                result = ToolResultPart(tool_call_id=call_id, tool_name=name, output=outcome.output)
        if result is None:
            return None
        used = [o.usage for o in known.values() if o.usage is not None]
        return WorkflowFinal(
            result=result.model_dump_json(),
            events=result_events(self.run_id, self.step, result),
            next_job=model_job(self.run_id, self.step + 1),
            usage=sum(used, Usage()) if used else None,
        )


async def load_call(store: RunStore, envelope: JobEnvelope) -> WorkflowCall | None:
    """The workflow call the job belongs to, or None when it no longer waits."""
    run_id, step, call_id = envelope.run_id, envelope.step, envelope.call_id or ""
    if (await store.meta(run_id))[MetaField.STATUS] in TERMINAL_STATUSES:
        return None  # cancelled or failed meanwhile: its nodes do not run
    call_json, status = await store.call_state(run_id, step, call_id)
    if call_json is None or status != CallStatus.AWAITING_RESULT:
        return None
    call = CallPlan.model_validate_json(call_json)
    tool_json = await store.tool_def(run_id, call.name)
    tool = ToolDef.model_validate_json(tool_json) if tool_json else None
    if tool is None or not isinstance(tool.config, WorkflowToolConfig):
        return None
    return WorkflowCall(run_id, step, call, tool.config)


async def start_workflow(store: RunStore, envelope: JobEnvelope) -> Reply | None:
    """The call's input is the input node's output: record it, which starts the rest."""
    wf = await load_call(store, envelope)
    if wf is None:
        return None
    record = wf.record(wf.graph.input_node.id, NodeOutcome(status="done", output=wf.call.input))
    # The graph's outline leads the call's progress (written once, with the input node's
    # outcome), so a viewer draws every node, waiting, before any of them runs.
    outline = wf.progress(wf.graph.outline())
    return await store.workflow_record(
        record.model_copy(update={"events": [outline, *record.events]})
    )


async def _outcomes(store: RunStore, wf: WorkflowCall) -> dict[str, NodeOutcome]:
    raw = await store.workflow_outcomes(wf.run_id, wf.step, wf.call.id)
    return {k: NodeOutcome.model_validate_json(v) for k, v in raw.items()}


async def run_node(
    store: RunStore,
    models: ModelClient,
    executors: dict[str, ToolExecutor],
    settings: Settings,
    envelope: JobEnvelope,
    attempt: int,
) -> Reply | None:
    wf = await load_call(store, envelope)
    node_id = envelope.node or ""
    if wf is None or node_id not in wf.graph.by_id:
        return None
    outcomes = await _outcomes(store, wf)
    outcome = outcomes.get(node_id)
    if outcome is None:
        node = wf.graph.by_id[node_id]
        if not is_active(wf.graph, node_id, outcomes):
            outcome = NodeOutcome(status="skipped")
        elif node.runs_as_child:
            outcome = await _child_node(store, settings, wf, node, outcomes)
            if outcome is None:
                return None  # its child run's end records it
        else:
            await store.emit(wf.run_id, [wf.progress({"node": node_id, "status": "running"})])
            outcome = await _outcome(wf, node, outcomes, models, executors, attempt)
    return await store.workflow_record(wf.record(node_id, outcome, outcomes))


async def _child_node(
    store: RunStore,
    settings: Settings,
    wf: WorkflowCall,
    node: WorkflowNode,
    outcomes: dict[str, NodeOutcome],
) -> NodeOutcome | None:
    """Start the node's child run; its outcome when the child has ended already (a job
    sent again after the child's end), else None (the child's end gives it)."""
    link = ParentLink(run_id=wf.run_id, step=wf.step, call_id=wf.call.id, node=node.id)
    if await store.exists(link.child_id):
        meta = await store.meta(link.child_id)
        ended = meta[MetaField.STATUS] in TERMINAL_STATUSES
        return await child_outcome(store, wf, link.child_id, meta, link) if ended else None
    await store.emit(wf.run_id, [wf.progress({"node": node.id, "status": "running"})])
    template = wf.config.children[node.id]
    known = values(outcomes)
    spec_of: Callable[[RunLimits], dict[str, Any]]
    try:
        if node.kind == "llm":
            prompt = str(render(node.prompt or "", known))
            system = str(render(node.system, known)) if node.system else None
            spec_of = partial(node_child_spec, template, prompt, system)
        else:
            spec_of = partial(node_call_spec, template, render(node.input or {}, known))
    except TemplateError as exc:
        return NodeOutcome(status="failed", error=f"TemplateError: {exc}")
    meta = await store.meta(wf.run_id)
    refusal = await sub_agents.open_child(store, settings, meta, link, spec_of)
    if refusal is not None:
        return NodeOutcome(status="failed", error=f"its child run {refusal}")
    return None


async def child_outcome(
    store: RunStore, wf: WorkflowCall, child_id: str, meta: dict[str, str], link: ParentLink
) -> NodeOutcome:
    """A node's outcome from its ended child run: an llm node's answer (its structured
    output, else its text), a tool node's call's result; or the child's failure. What the
    child's tree used counts either way."""
    answer = sub_agents.child_result(child_id, meta, link, wf.call.name)
    if not answer.is_error and wf.graph.by_id[link.node or ""].kind != "llm":
        recorded = await store.call_result(child_id, 0, NODE_CALL_ID)
        answer = (
            ToolResultPart.model_validate_json(recorded)
            if recorded is not None
            else error_result(
                link.call_id, wf.call.name, "its call has no result", ToolErrorKind.EXECUTION
            )
        )
    usage = rolled_up_usage(meta)
    if answer.is_error:
        return NodeOutcome(status="failed", error=str(answer.output), usage=usage)
    return NodeOutcome(status="done", output=answer.output, usage=usage)


async def node_child_ended(
    store: RunStore, child_id: str, meta: dict[str, str], link: ParentLink
) -> Reply | None:
    """A node's child run has ended: record its outcome (a no-op when recorded)."""
    envelope = JobEnvelope(
        kind="workflow_node",
        run_id=link.run_id,
        step=link.step,
        call_id=link.call_id,
        node=link.node,
    )
    wf = await load_call(store, envelope)
    if wf is None or link.node not in wf.graph.by_id:
        return None
    outcomes = await _outcomes(store, wf)
    outcome = outcomes.get(link.node) or await child_outcome(store, wf, child_id, meta, link)
    return await store.workflow_record(wf.record(link.node, outcome, outcomes))


async def _outcome(
    wf: WorkflowCall,
    node: WorkflowNode,
    outcomes: dict[str, NodeOutcome],
    models: ModelClient,
    executors: dict[str, ToolExecutor],
    attempt: int,
) -> NodeOutcome:
    try:
        if node.kind == "llm":
            output, usage = await _call_model(wf, node, values(outcomes), models)
            return NodeOutcome(status="done", output=output, usage=usage)
        output = await _execute(wf, node, outcomes, executors, attempt)
    except Exception as exc:
        if is_transient_redis(exc):
            raise
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return NodeOutcome(status="failed", error=str(message))
    return NodeOutcome(status="done", output=output)


async def _execute(
    wf: WorkflowCall,
    node: WorkflowNode,
    outcomes: dict[str, NodeOutcome],
    executors: dict[str, ToolExecutor],
    attempt: int,
) -> Any:
    known = values(outcomes)
    if node.kind == "template":
        return render(node.template, known)
    if node.kind == "condition":
        return evaluate_condition(node.condition or "", outcomes)
    if node.kind == "output":
        return render(node.value, known)
    if node.kind in ("tool", "http"):
        return await _run_tool(wf, node, render(node.input or {}, known), executors, attempt)
    raise ValueError(f"a {node.kind} node does not run as a job")


async def _run_tool(
    wf: WorkflowCall,
    node: WorkflowNode,
    tool_input: Any,
    executors: dict[str, ToolExecutor],
    attempt: int,
) -> Any:
    tool = wf.config.tools[node.id]
    validate_input(tool, tool_input)
    executor = executors.get(tool.kind)
    if executor is None:
        raise ValueError(f"this worker cannot run {tool.kind} tools (misrouted node)")
    context = ToolContext(
        run_id=wf.run_id,
        step=wf.step,
        call_id=f"{wf.call.id}.{node.id}",
        tool=tool,
        attempt=attempt,
        deadline_at=time.time() + tool.timeout_s,
    )
    return await executor.execute(tool, tool_input, context)


async def _call_model(
    wf: WorkflowCall, node: WorkflowNode, known: dict[str, Any], models: ModelClient
) -> tuple[Any, Usage]:
    model = ModelRef.model_validate(wf.config.models[node.id])
    offered = (
        [
            OfferedTool(
                name=RESPOND_TOOL, description="Give the answer.", input_schema=node.output_schema
            )
        ]
        if node.output_schema is not None
        else []
    )
    request = ModelRequest(
        model=model,
        system=render(node.system, known) if node.system else None,
        messages=[UserMessage(content=str(render(node.prompt or "", known)))],
        tools=offered,
        tool_choice=ToolChoiceTool(tool=RESPOND_TOOL) if offered else "auto",
        timeout_s=model.timeout_s,
    )
    response = models.priced(model, await models.generate(request, DiscardDeltas()), batch=False)
    if node.output_schema is None:
        return response.text, response.usage
    answer = next((c for c in response.tool_calls if c.name == RESPOND_TOOL), None)
    if answer is None:
        raise ValueError("the model gave no structured output")
    output = parse_arguments(answer.arguments)
    problems = schema_problems(node.output_schema, output)
    if problems:
        raise ValueError(f"the model's output does not match output_schema: {problems[0]}")
    return output, response.usage
