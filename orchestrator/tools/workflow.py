"""`workflow`: a tool made of a graph of nodes (orchestrator/tools/workflow_graph.py). A call
parks, holding no worker, while its nodes run as jobs (independent branches in
parallel, each node's outcome written once); the output node's value is the result.

The graph is the entry's own (`graph`), or a published workflow's
(`workflow`, optionally `version`; orchestrator/tools/workflow_catalogue.py).

Everything a node may reach is fixed at submit: the graph is validated, each tool
node's tool is resolved by its own kind (as a run's tools are), each llm node's model
is checked against the deployment's endpoint policy, and an llm node with tools is a
child run whose spec is checked as a sub-agent's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

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
from agentq.orchestrator.tools.workflow_catalogue import WorkflowDefinition, published
from agentq.orchestrator.tools.workflow_graph import WorkflowGraph, WorkflowNode, validate_graph


class WorkflowToolSpec(ToolSpecBase):
    type: Literal["workflow"] = "workflow"
    # Default for a published workflow: its name.
    name: ToolName | None = None
    description: str = ""
    input_schema: InputSchema | None = None  # default: any object
    graph: WorkflowGraph | None = None
    workflow: str | None = None  # a published workflow's name
    version: int | None = Field(default=None, ge=1)  # None: the latest

    @model_validator(mode="after")
    def _one_source(self) -> WorkflowToolSpec:
        if (self.graph is None) == (self.workflow is None):
            raise ValueError("a workflow tool needs exactly one of 'graph' or 'workflow'")
        if self.graph is not None and self.name is None:
            raise ValueError("a workflow tool with a 'graph' needs a 'name'")
        if self.version is not None and self.workflow is None:
            raise ValueError("'version' picks a version of a published 'workflow'")
        if self.workflow is not None and self.input_schema is not None:
            raise ValueError("a published workflow's input_schema is its own")
        return self


class WorkflowToolConfig(KindConfig):
    graph: WorkflowGraph
    # The published workflow and version the graph is, when the entry named one.
    workflow: str | None = None
    version: int | None = None
    # Resolved at submit: each tool node's tool, each llm node's model (a ModelRef dict).
    tools: dict[str, ToolDef] = Field(default_factory=dict)
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # The run spec template of each node that runs as a child run (its prompt and system,
    # or its tool's input, filled in when it runs), checked at submit as a sub-agent's is.
    children: dict[str, dict[str, Any]] = Field(default_factory=dict)


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


# Kinds a tool node cannot use: a client tool's result comes from whoever submitted the
# run, a provider's from inside a model step.
_PARKED_KINDS = ("client", "provider")
# The id of the one call of a tool node's child run.
NODE_CALL_ID = "node"


def node_entry(node: WorkflowNode, at: str) -> tuple[ToolKindPlugin, ToolSpecBase]:
    """A tool node's entry, parsed by its kind (SpecError naming the node otherwise)."""
    entry_json = node.tool or {}
    if node.kind == "http":
        entry_json = {"type": "http", "name": node.id, **entry_json}
    kind = str(entry_json.get("type", ""))
    plugin = tool_kind(kind)
    if plugin is None:
        raise SpecError(f"{at}.tool: unknown tool type {kind!r}")
    if kind in _PARKED_KINDS:
        raise SpecError(f"{at}.tool: a workflow node cannot run {kind} tools")
    try:
        return plugin, plugin.spec_model.model_validate(entry_json)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise SpecError(f"{at}.tool.{loc}: {first['msg']}") from None


def check_definition(definition: WorkflowDefinition) -> None:
    """What publishing checks of a workflow, offline: its graph and each tool node's
    entry (whether the deployment serves the tools and models is judged at submit, as
    for any spec). A SpecError names the workflow and the bad node or edge."""
    where = f"workflow {definition.name!r}: graph"
    validate_graph(definition.graph, where)
    for node in definition.graph.nodes:
        if node.kind in ("tool", "http"):
            node_entry(node, f"{where}.nodes[{node.id}]")


def node_tool(node: WorkflowNode, ctx: ResolveContext, at: str) -> ToolDef:
    try:
        plugin, entry = node_entry(node, at)
    except SpecError as exc:
        raise refuse(ctx, exc.message) from None
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


def child_template(
    node: WorkflowNode, model: dict[str, Any], ctx: ResolveContext, at: str
) -> dict[str, Any]:
    """The child run an llm node with tools is: its model, its tools, its step budget and
    its output schema; checked as a top-level spec's would be (its tools resolved)."""
    template: dict[str, Any] = {"model": model, "tools": node.tools or []}
    if node.max_steps is not None:
        template["max_steps"] = node.max_steps
    if node.output_schema is not None:
        template["output"] = {"schema": node.output_schema}
    _check_child(template, ctx, at)
    return template


def call_template(
    node: WorkflowNode, tool: ToolDef, ctx: ResolveContext, at: str
) -> dict[str, Any]:
    """The child run a tool node of an agent, workflow or remote tool is: one scripted
    step calling the tool (its input filled in when the node runs, as `agentq workflow
    run` runs a workflow), so the run's own machinery starts, parks or leases the call.
    A published workflow is pinned to the version resolved now: a version published
    later leaves this run alone."""
    entry = dict(node.tool or {})
    if isinstance(tool.config, WorkflowToolConfig) and tool.config.version is not None:
        entry["version"] = tool.config.version
    call = {"name": tool.name, "input": {}, "id": NODE_CALL_ID}
    template: dict[str, Any] = {
        "model": {"provider": "scripted", "script": [{"tool_calls": [call]}]},
        "tools": [entry],
        "max_steps": 1,
    }
    _check_child(template, ctx, at)
    return template


def _check_child(template: dict[str, Any], ctx: ResolveContext, at: str) -> None:
    try:
        ctx.check_child_spec({**template, "prompt": "(the node's prompt)"})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise refuse(ctx, f"{at}.{loc}: {first['msg']}") from None
    except SpecError as exc:
        raise refuse(ctx, f"{at}: {exc.message}") from None


class WorkflowKind(ToolKindPlugin):
    kind = "workflow"
    spec_model = WorkflowToolSpec
    config_model = WorkflowToolConfig
    executed_by_worker = False  # its graph's end answers it

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        version: int | None = None
        if entry.workflow is not None:
            try:
                version, found = published(ctx.workflows, entry.workflow, entry.version)
            except SpecError as exc:
                raise type(exc)(f"{ctx.where}.workflow: {exc.message}") from None
            if entry.workflow in ctx.resolving:
                chain = " -> ".join((*ctx.resolving, entry.workflow))
                raise refuse(ctx, f"workflow: the published workflows call each other: {chain}")
            ctx = replace(ctx, resolving=(*ctx.resolving, entry.workflow))
            # The published definition stands in for the entry's own fields; the run
            # freezes it, so a later version leaves this run's calls alone.
            entry = entry.model_copy(
                update={
                    "name": entry.name or found.name,
                    "description": entry.description or found.description,
                    "input_schema": found.input_schema,
                    "graph": found.graph,
                }
            )
        elif entry.input_schema is None:
            entry = entry.model_copy(update={"input_schema": {"type": "object"}})
        graph: WorkflowGraph = entry.graph
        try:
            validate_graph(graph, "graph")
        except SpecError as exc:
            raise refuse(ctx, exc.message) from None
        tools: dict[str, ToolDef] = {}
        models: dict[str, dict[str, Any]] = {}
        children: dict[str, dict[str, Any]] = {}
        for node in graph.nodes:
            at = f"graph.nodes[{node.id}]"
            if node.kind in ("tool", "http"):
                tool = node_tool(node, ctx, at)
                if node.runs_as_child:
                    children[node.id] = call_template(node, tool, ctx, at)
                else:
                    tools[node.id] = tool
            elif node.kind == "llm":
                models[node.id] = node_model(node, ctx, at)
                if node.runs_as_child:
                    children[node.id] = child_template(node, models[node.id], ctx, at)
        return [
            self.described_tool(
                entry,
                ctx,
                entry.name,
                start_queue=MODEL_QUEUE,
                config=WorkflowToolConfig(
                    graph=graph,
                    workflow=entry.workflow,
                    version=version,
                    tools=tools,
                    models=models,
                    children=children,
                ),
            )
        ]
