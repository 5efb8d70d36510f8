"""A workflow tool's graph: its nodes and edges, validated at submit, and the pure rules
its durable execution follows (which nodes a finished node makes ready, whether a node
runs or is skipped, what its template values are).

Node kinds: `input` (the call's input), `llm` (a model call; with `tools`, a small agent
loop run as a child run of the call's run, each step a job as the run's own), `tool`
(any tool a worker executes; `http`, an HTTP request, is a tool node of the http kind),
`template` (text over earlier outputs), `condition` (a JMESPath expression
over earlier outputs, never Python's eval: its edges carry "true" or "false"),
`output` (the call's result). Templates use `{{node.path}}` (orchestrator/core/templating.py).
"""

from __future__ import annotations

import graphlib
from collections.abc import Collection, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.templating import references, root
from agentq.orchestrator.policy import spec_jmespath

NodeKind = Literal["input", "llm", "tool", "http", "template", "condition", "output"]
Branch = Literal["true", "false"]
# Tool kinds no worker executes in place (a child run answers them, or a service that
# leases them): a tool node of one runs as a one-call child run of the call's run.
CALLED_IN_A_CHILD = ("agent", "workflow", "remote")
NODE_ID = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class WorkflowNode(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(pattern=NODE_ID)
    kind: NodeKind
    # llm: a model (a RunSpec `model`), a prompt template, optional system and schema
    model: Any = None
    prompt: str | None = None
    system: str | None = None
    output_schema: dict[str, Any] | None = None
    # llm: tool entries (as a RunSpec's `tools`) the model may call, in a loop of at most
    # `max_steps` model steps
    tools: list[dict[str, Any]] | None = None
    max_steps: int | None = Field(default=None, ge=1, le=100)
    # tool: a tool entry of any kind, and its input template; http: an http tool entry
    # (its `type` and `name` may be left out)
    tool: dict[str, Any] | None = None
    input: Any = None
    # template
    template: str | None = None
    # condition: a JMESPath expression over earlier outputs; true when truthy
    condition: str | None = Field(default=None, alias="if")
    # output
    value: Any = None

    @property
    def runs_as_child(self) -> bool:
        """Whether the node's work is a child run of the call's run, whose end gives its
        outcome: an llm node that calls tools (the run's loop, not a second one), or a
        tool node calling an agent, workflow or remote tool (the run's parking)."""
        if self.kind == "llm":
            return bool(self.tools)
        return self.kind == "tool" and (self.tool or {}).get("type") in CALLED_IN_A_CHILD

    def templates(self) -> list[Any]:
        """The parts of the node whose references are filled in when it runs."""
        return [t for t in (self.prompt, self.system, self.input, self.template, self.value) if t]


class Edge(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    branch: Branch | None = None  # edges out of a condition: which outcome they follow


def _edge(value: Any) -> Any:
    if isinstance(value, list | tuple) and len(value) in (2, 3):
        branch = value[2] if len(value) == 3 else None
        if isinstance(branch, bool):
            branch = "true" if branch else "false"
        return {"source": value[0], "target": value[1], "branch": branch}
    return value


class WorkflowGraph(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: list[WorkflowNode]
    edges: list[Edge]

    @field_validator("edges", mode="before")
    @classmethod
    def _edges(cls, value: Any) -> Any:
        return [_edge(v) for v in value] if isinstance(value, list) else value

    @property
    def by_id(self) -> dict[str, WorkflowNode]:
        return {n.id: n for n in self.nodes}

    def preds(self, node: str) -> list[Edge]:
        return [e for e in self.edges if e.target == node]

    def succs(self, node: str) -> list[str]:
        return sorted({e.target for e in self.edges if e.source == node})

    def in_flight(self, recorded: Collection[str]) -> list[str]:
        """The nodes whose jobs a record enqueued (every predecessor has an outcome) and
        that have none yet: what a workflow call that still waits has queued or running."""
        return [
            n.id
            for n in self.nodes
            if n.id not in recorded
            and (preds := self.preds(n.id))
            and all(e.source in recorded for e in preds)
        ]

    @property
    def input_node(self) -> WorkflowNode:
        return next(n for n in self.nodes if n.kind == "input")

    @property
    def output_node(self) -> WorkflowNode:
        return next(n for n in self.nodes if n.kind == "output")

    def ancestors(self, node: str) -> set[str]:
        seen: set[str] = set()
        todo = [e.source for e in self.preds(node)]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo += [e.source for e in self.preds(current)]
        return seen

    def outline(self) -> dict[str, Any]:
        """What a viewer needs to draw the graph before any node runs: each node's id and
        kind, predecessors first (a valid graph has no cycle), and the edges as written,
        `[source, target]` or, out of a condition, `[source, target, branch]`."""
        order = graphlib.TopologicalSorter(
            {n.id: [e.source for e in self.preds(n.id)] for n in self.nodes}
        )
        kinds = {n.id: n.kind for n in self.nodes}
        return {
            "nodes": [{"id": n, "kind": kinds[n]} for n in order.static_order()],
            "edges": [[e.source, e.target, *([e.branch] if e.branch else [])] for e in self.edges],
        }


def _refuse(where: str, message: str) -> SpecError:
    return SpecError(f"{where}: {message}")


def validate_graph(graph: WorkflowGraph, where: str) -> None:
    """One input, one reachable output, no cycles, edges and references between existing
    nodes (a node reads only nodes before it), each node complete for its kind."""
    ids = [n.id for n in graph.nodes]
    nodes = graph.by_id
    for node_id in ids:
        if ids.count(node_id) > 1:
            raise _refuse(f"{where}.nodes", f"two nodes have the id {node_id!r}")
    for kind in ("input", "output"):
        count = sum(1 for n in graph.nodes if n.kind == kind)
        if count != 1:
            raise _refuse(f"{where}.nodes", f"a workflow needs exactly one {kind} node ({count})")
    for i, edge in enumerate(graph.edges):
        for end in (edge.source, edge.target):
            if end not in nodes:
                raise _refuse(f"{where}.edges[{i}]", f"no node has the id {end!r}")
        is_condition = nodes[edge.source].kind == "condition"
        if is_condition and edge.branch is None:
            raise _refuse(
                f"{where}.edges[{i}]",
                f'an edge out of condition {edge.source!r} needs a branch, "true" or "false"',
            )
        if not is_condition and edge.branch is not None:
            raise _refuse(f"{where}.edges[{i}]", f"node {edge.source!r} is not a condition")
    sorter = graphlib.TopologicalSorter({n: [e.source for e in graph.preds(n)] for n in ids})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = " -> ".join(str(n) for n in exc.args[1])
        raise _refuse(f"{where}.edges", f"the graph has a cycle: {cycle}") from None
    start = graph.input_node.id
    for node in graph.nodes:
        at = f"{where}.nodes[{node.id}]"
        if node.id != start and start not in graph.ancestors(node.id):
            raise _refuse(at, "is not reachable from the input node")
        if node.kind == "input" and graph.preds(node.id):
            raise _refuse(at, "the input node cannot have incoming edges")
        _check_fields(node, at)
        before = graph.ancestors(node.id)
        for template in node.templates():
            for ref in references(template):
                name = root(ref)
                if name not in nodes:
                    raise _refuse(at, f"{{{{{ref}}}}} refers to no node ({name!r})")
                if name not in before:
                    raise _refuse(
                        at, f"{{{{{ref}}}}} refers to {name!r}, which does not run before it"
                    )


_REQUIRED: dict[str, tuple[str, ...]] = {
    "llm": ("model", "prompt"),
    "tool": ("tool",),
    "http": ("tool",),
    "template": ("template",),
    "condition": ("condition",),
}


def _check_fields(node: WorkflowNode, at: str) -> None:
    for name in _REQUIRED.get(node.kind, ()):
        if getattr(node, name) is None:
            label = "if" if name == "condition" else name
            raise _refuse(at, f"a {node.kind} node needs {label!r}")
    if node.kind != "llm" and (node.tools is not None or node.max_steps is not None):
        raise _refuse(at, "only an llm node takes 'tools' and 'max_steps'")
    if node.condition is not None:
        try:
            spec_jmespath.check_expression(node.condition)
        except ValueError as exc:
            raise _refuse(at, f"'if': {exc}") from None


# -- execution rules (pure) ---------------------------------------------------------

NodeStatus = Literal["done", "skipped", "failed"]


class NodeOutcome(BaseModel):
    """A node's recorded outcome (written once)."""

    model_config = ConfigDict(extra="forbid")

    status: NodeStatus
    output: Any = None
    error: str | None = None
    usage: Usage | None = None  # an llm node's model usage


def is_active(graph: WorkflowGraph, node: str, outcomes: Mapping[str, NodeOutcome]) -> bool:
    """Whether the node runs: some incoming edge comes from a node that ran and, out of
    a condition, follows the branch it took. (Every predecessor has an outcome.)"""
    for edge in graph.preds(node):
        source = outcomes[edge.source]
        if source.status != "done":
            continue
        if edge.branch is None or (edge.branch == "true") == bool(source.output):
            return True
    return False


def values(outcomes: Mapping[str, NodeOutcome]) -> dict[str, Any]:
    """What templates and conditions read: each node's output (None when skipped)."""
    return {node: o.output if o.status == "done" else None for node, o in outcomes.items()}


def evaluate_condition(expression: str, outcomes: Mapping[str, NodeOutcome]) -> bool:
    """JMESPath truthiness: false, null, "", [] and {} are false. Raises
    ExpressionLimitError (the node fails) when the condition runs past its bounds."""
    return spec_jmespath.truthy(spec_jmespath.search(expression, values(outcomes)))
