"""`agentq workflow run`: a workflow tool on its own, as a real process (embedded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_e2e_cli_errors import agentq, one_line
from tests.support.infra import REPO

pytestmark = pytest.mark.e2e

ADDER = REPO / "examples" / "adder_workflow.json"
TOOLS = "examples/quickstart_tools.py"


def write(tmp_path: Path, change: Any) -> str:
    entry = json.loads(ADDER.read_text())
    change(entry)
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(entry))
    return str(path)


def test_it_prints_the_output_as_json() -> None:
    done = agentq("workflow", "run", str(ADDER), "--input", '{"x": 2, "y": 40}', "--tools", TOOLS)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 42.0


def test_a_failing_node_exits_1_naming_it(tmp_path: Path) -> None:
    def divide_by_nothing(entry: dict[str, Any]) -> None:
        entry["graph"]["nodes"][1]["input"] = {"a": "{{in.x}}", "b": "{{in.z}}"}

    done = agentq(
        "workflow",
        "run",
        write(tmp_path, divide_by_nothing),
        "--input",
        '{"x": 1}',
        "--tools",
        TOOLS,
    )
    assert done.returncode == 1, done.stderr
    assert "The workflow node 'sum' failed: TemplateError: {{in.z}} names nothing" in done.stderr


def test_a_bad_graph_exits_2_naming_the_node(tmp_path: Path) -> None:
    def loop(entry: dict[str, Any]) -> None:
        entry["graph"]["edges"].append(["out", "sum"])

    done = agentq("workflow", "run", write(tmp_path, loop), "--tools", TOOLS)
    one_line(done, 2, "graph.edges: the graph has a cycle: sum -> out -> sum")
    done = agentq("workflow", "run", str(ADDER), "--input", "{x", "--tools", TOOLS)
    one_line(done, 2, "--input is not valid JSON")
