"""Workflow graphs: validation at submit (errors name the node), templates, conditions,
and which nodes run or are skipped (pure)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.templating import TemplateError, render
from agentq.orchestrator.spec.resolution import resolve_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolAnnouncement
from agentq.orchestrator.tools.workflow_graph import (
    NodeOutcome,
    WorkflowGraph,
    evaluate_condition,
    is_active,
    validate_graph,
)

pytestmark = pytest.mark.unit

ADD = ToolAnnouncement(
    name="add",
    kind="function",
    queue="tools",
    input_schema={"type": "object", "properties": {"a": {}, "b": {}}},
    seen_at=1_000_000.0,
)
NOW = 1_000_000.0  # the announcement is fresh whenever the test runs
REGISTRY = {"add": ADD}

GRAPH: dict[str, Any] = {
    "nodes": [
        {"id": "in", "kind": "input"},
        {
            "id": "sum",
            "kind": "tool",
            "tool": {"type": "function", "name": "add"},
            "input": {"a": "{{in.x}}", "b": "{{in.y}}"},
        },
        {"id": "out", "kind": "output", "value": "{{sum}}"},
    ],
    "edges": [["in", "sum"], ["sum", "out"]],
}


def graph_with(change: Any) -> dict[str, Any]:
    graph = copy.deepcopy(GRAPH)
    change(graph)
    return graph


def resolve(graph: dict[str, Any]) -> None:
    tool = {"type": "workflow", "name": "adder", "graph": graph}
    spec = RunSpec.model_validate(
        {"model": {"provider": "scripted", "script": []}, "prompt": "go", "tools": [tool]}
    )
    resolve_tools(spec, REGISTRY, NOW, settings=Settings())


def test_the_adder_resolves_with_its_node_tool() -> None:
    resolve(GRAPH)


BAD: list[tuple[str, Any, str]] = [
    (
        "two inputs",
        lambda g: g["nodes"].append({"id": "in2", "kind": "input"}),
        "graph.nodes: a workflow needs exactly one input node (2)",
    ),
    (
        "no output",
        lambda g: g["nodes"].pop(),
        "graph.nodes: a workflow needs exactly one output node (0)",
    ),
    (
        "a cycle",
        lambda g: g["edges"].append(["out", "sum"]),
        "graph.edges: the graph has a cycle",
    ),
    (
        "an unreachable node",
        lambda g: g["nodes"].append({"id": "lost", "kind": "template", "template": "x"}),
        "graph.nodes[lost]: is not reachable from the input node",
    ),
    (
        "a reference to no node",
        lambda g: g["nodes"][2].update(value="{{summ}}"),
        "graph.nodes[out]: {{summ}} refers to no node ('summ')",
    ),
    (
        "a reference to a later node",
        lambda g: g["nodes"][1].update(input={"a": "{{out}}", "b": 1}),
        "graph.nodes[sum]: {{out}} refers to 'out', which does not run before it",
    ),
    (
        "a tool nobody serves",
        lambda g: g["nodes"][1]["tool"].update(name="mul"),
        "graph.nodes[sum].tool: no worker serves the function tool 'mul'",
    ),
    (
        "a client tool",
        lambda g: g["nodes"][1].update(tool={"type": "client", "name": "ask"}),
        "graph.nodes[sum].tool: a workflow node cannot run client tools",
    ),
    (
        "a condition without branches",
        lambda g: (
            g["nodes"].insert(2, {"id": "c", "kind": "condition", "if": "sum > `1`"}),
            g["edges"].__setitem__(1, ["sum", "c"]),
            g["edges"].append(["c", "out"]),
        ),
        "graph.edges[2]: an edge out of condition 'c' needs a branch",
    ),
    (
        "a condition that is no expression",
        lambda g: (
            g["nodes"].insert(2, {"id": "c", "kind": "condition", "if": "sum >"}),
            g["edges"].__setitem__(1, ["sum", "c"]),
            g["edges"].append(["c", "out", True]),
        ),
        "graph.nodes[c]: 'if': not a valid JMESPath expression",
    ),
    (
        "an llm node with a model the deployment refuses",
        lambda g: (
            g["nodes"].insert(
                2,
                {
                    "id": "ask",
                    "kind": "llm",
                    "prompt": "x",
                    "model": {"provider": "openai", "name": "m", "api_key_env": "HOME"},
                },
            ),
            g["edges"].__setitem__(1, ["sum", "ask"]),
            g["edges"].append(["ask", "out"]),
        ),
        "graph.nodes[ask].model.api_key_env: 'HOME' is not a variable specs may name",
    ),
]


@pytest.mark.parametrize(("change", "error"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_graph_is_refused_at_submit_naming_the_node(change: Any, error: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve(graph_with(change))
    assert caught.value.message.startswith("tools[0]: " + error), caught.value.message


def test_exact_references_keep_their_type_and_others_interpolate() -> None:
    values = {"in": {"x": 2, "tags": ["a", "b"]}, "sum": 5.0}
    assert render("{{in.x}}", values) == 2
    assert render({"v": "{{ sum }}"}, values) == {"v": 5.0}
    assert render("{{in.x}} + {{in.tags}}", values) == '2 + ["a", "b"]'
    assert render("{{in.tags.1}}", values) == "b"
    with pytest.raises(TemplateError, match="names nothing"):
        render("{{in.y}}", values)


def test_conditions_choose_a_branch_and_skip_the_other() -> None:
    graph = WorkflowGraph.model_validate(
        {
            "nodes": [
                {"id": "in", "kind": "input"},
                {"id": "c", "kind": "condition", "if": "in.x > `1` && in.name == 'a'"},
                {"id": "yes", "kind": "template", "template": "y"},
                {"id": "no", "kind": "template", "template": "n"},
                {"id": "out", "kind": "output", "value": "{{yes}}"},
            ],
            "edges": [
                ["in", "c"],
                ["c", "yes", "true"],
                ["c", "no", False],
                ["yes", "out"],
                ["no", "out"],
            ],
        }
    )
    validate_graph(graph, "graph")
    outcomes = {"in": NodeOutcome(status="done", output={"x": 3, "name": "a"})}
    taken = evaluate_condition("in.x > `1` && in.name == 'a'", outcomes)
    assert taken is True
    outcomes["c"] = NodeOutcome(status="done", output=taken)
    assert is_active(graph, "yes", outcomes)
    assert not is_active(graph, "no", outcomes)
    outcomes["yes"] = NodeOutcome(status="done", output="y")
    outcomes["no"] = NodeOutcome(status="skipped")
    assert is_active(graph, "out", outcomes)


JOIN: dict[str, Any] = {
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "a", "kind": "template", "template": "a"},
        {"id": "b", "kind": "template", "template": "b"},
        {"id": "out", "kind": "output", "value": "{{a}}{{b}}"},
    ],
    "edges": [["in", "a"], ["in", "b"], ["a", "out"], ["b", "out"]],
}


@pytest.mark.parametrize(
    ("recorded", "in_flight"),
    [
        (set(), []),  # not started: the call's start job, not a node's, is in flight
        ({"in"}, ["a", "b"]),
        ({"in", "a"}, ["b"]),  # the join waits for b
        ({"in", "a", "b"}, ["out"]),
        ({"in", "a", "b", "out"}, []),
    ],
)
def test_the_nodes_in_flight_are_those_enqueued_and_unrecorded(
    recorded: set[str], in_flight: list[str]
) -> None:
    assert WorkflowGraph.model_validate(JOIN).in_flight(recorded) == in_flight


def test_the_outline_lists_predecessors_first_and_keeps_branches() -> None:
    declared = {
        "nodes": [
            {"id": "out", "kind": "output", "value": "{{yes}}"},
            {"id": "yes", "kind": "template", "template": "y"},
            {"id": "c", "kind": "condition", "if": "in.x"},
            {"id": "in", "kind": "input"},
        ],
        "edges": [["in", "c"], ["c", "yes", True], ["yes", "out"]],
    }
    outline = WorkflowGraph.model_validate(declared).outline()
    assert outline == {
        "nodes": [
            {"id": "in", "kind": "input"},
            {"id": "c", "kind": "condition"},
            {"id": "yes", "kind": "template"},
            {"id": "out", "kind": "output"},
        ],
        "edges": [["in", "c"], ["c", "yes", "true"], ["yes", "out"]],
    }
