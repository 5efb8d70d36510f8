"""`workflow`: a tool made of a graph of nodes (orchestrator/tools/workflow_graph.py). A call
parks, holding no worker, while its nodes run as jobs (independent branches in
parallel, each node's outcome written once); the output node's value is the result.

Everything a node may reach is fixed at submit: the graph is validated, each tool
node's tool is resolved by its own kind (as a run's tools are), each llm node's model
is checked against the deployment's endpoint policy.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError

from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef, parse_model
from agentq.orchestrator.policy.providers import provider_table
from agentq.orchestrator.tools.announcements import announced_providers
from agentq.orchestrator.tools.base import (
    InputSchema,
    KindConfig,
    ResolveContext,
    ToolDef,
    ToolKindPlugin,
    ToolName,
    ToolSpecBase,
    refuse,
    tool_kind,
    tool_needs,
)
from agentq.orchestrator.tools.workflow_graph import WorkflowGraph, WorkflowNode, validate_graph


class WorkflowToolSpec(ToolSpecBase):
    type: Literal["workflow"] = "workflow"
    name: ToolName
    description: str = ""
    input_schema: InputSchema = Field(default_factory=lambda: {"type": "object"})
    graph: WorkflowGraph


class WorkflowToolConfig(KindConfig):
    graph: WorkflowGraph
    # Resolved at submit: each tool node's tool, each llm node's model (a ModelRef dict).
    tools: dict[str, ToolDef] = Field(default_factory=dict)
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)


def node_job(
    run_id: str, step: int, call_id: str, node: str, config: WorkflowToolConfig
) -> QueuedJob:
    """A node's job: on its tool's queue (a tool node), claimed only by workers serving
    the tool; else the model queue, on any of its workers."""
    tool = config.tools.get(node)
    queue = tool.queue if tool is not None and tool.queue else MODEL_QUEUE
    envelope = JobEnvelope(
        kind="workflow_node",
        run_id=run_id,
        step=step,
        call_id=call_id,
        node=node,
        needs=tool_needs(tool) if tool is not None else "",
    )
    return queued_job(envelope, queue)


# Kinds a tool node cannot use: nothing on a queue executes them.
# (A remote tool's service reads its own jobs, not a workflow node's.)
_PARKED_KINDS = ("client", "provider", "agent", "workflow", "remote")


def node_tool(node: WorkflowNode, ctx: ResolveContext, at: str) -> ToolDef:
    entry_json = node.tool or {}
    if node.kind == "http":
        entry_json = {"type": "http", "name": node.id, **entry_json}
    kind = str(entry_json.get("type", ""))
    plugin = tool_kind(kind)
    if plugin is None:
        raise refuse(ctx, f"{at}.tool: unknown tool type {kind!r}")
    if kind in _PARKED_KINDS:
        raise refuse(ctx, f"{at}.tool: a workflow node cannot run {kind} tools")
    try:
        entry = plugin.spec_model.model_validate(entry_json)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise refuse(ctx, f"{at}.tool.{loc}: {first['msg']}") from None
    try:
        offered = {t.name: t for t in plugin.offer(entry, ctx)}
    except SpecError as exc:
        rest = exc.message.removeprefix(ctx.where)  # the kind names the entry as tools[i]
        where = f"{at}.tool{rest}" if rest.startswith(".") else f"{at}.tool: {rest.lstrip(': ')}"
        raise refuse(ctx, where) from None
    names = entry.tools or list(offered)
    if len(names) != 1 or names[0] not in offered:
        raise refuse(ctx, f"{at}.tool: name exactly one of its tools with 'tools': [NAME]")
    return offered[names[0]].model_copy(update={"timeout_s": ctx.timeout_s})


def node_model(node: WorkflowNode, ctx: ResolveContext, at: str) -> dict[str, Any]:
    try:
        ref = ModelRef.model_validate(parse_model(node.model))
    except (ValidationError, ValueError) as exc:
        raise refuse(ctx, f"{at}.model: {exc}".splitlines()[0]) from None
    table = provider_table(announced_providers(ctx.registry))
    try:
        endpoint = EndpointPolicy.from_settings(ctx.settings).resolve(ref, table)
    except SpecError as exc:
        raise refuse(ctx, f"{at}.{exc.message}") from None
    if endpoint.endpoint is not None and ref.endpoint is None:
        ref = ref.model_copy(
            update={"endpoint": endpoint.endpoint, "provider": endpoint.provider.name}
        )
    return ref.model_dump(mode="json", exclude_none=True)


class WorkflowKind(ToolKindPlugin):
    kind = "workflow"
    spec_model = WorkflowToolSpec
    config_model = WorkflowToolConfig
    executed_by_worker = False  # its graph's end answers it

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        graph: WorkflowGraph = entry.graph
        try:
            validate_graph(graph, "graph")
        except SpecError as exc:
            raise refuse(ctx, exc.message) from None
        tools: dict[str, ToolDef] = {}
        models: dict[str, dict[str, Any]] = {}
        for node in graph.nodes:
            at = f"graph.nodes[{node.id}]"
            if node.kind in ("tool", "http"):
                tools[node.id] = node_tool(node, ctx, at)
            elif node.kind == "llm":
                models[node.id] = node_model(node, ctx, at)
        return [
            self.described_tool(
                entry,
                ctx,
                entry.name,
                start_queue=MODEL_QUEUE,
                config=WorkflowToolConfig(graph=graph, tools=tools, models=models),
            )
        ]
