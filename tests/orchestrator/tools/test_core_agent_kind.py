"""Sub-agent tools: their spec templates are checked at submit like a run's spec, and a
call's input fills a template into the child's spec (pure)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.run_ids import child_run_id
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.children import child_spec
from agentq.orchestrator.spec.limits import RunLimits
from agentq.orchestrator.spec.resolution import resolve_tools
from agentq.orchestrator.spec.run import RUN_ID, RunSpec
from agentq.orchestrator.tools.agent import DEFAULT_AGENT_INPUT

pytestmark = pytest.mark.unit

SCRIPTED = {"provider": "scripted", "script": [{"text": "hi"}]}
NONE = RunLimits()  # a parent without limits of its own


def resolve(tool: dict[str, Any], settings: Settings | None = None) -> list[Any]:
    spec = RunSpec.model_validate({"model": SCRIPTED, "prompt": "go", "tools": [tool]})
    return resolve_tools(spec, {}, time.time(), settings=settings or Settings())


def test_an_agent_tool_parks_and_takes_a_prompt_by_default() -> None:
    (tool,) = resolve({"type": "agent", "name": "helper", "spec": {"model": SCRIPTED}})
    assert tool.queue is None
    assert tool.start_queue == "model"
    assert tool.input_schema == DEFAULT_AGENT_INPUT


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ({"model": "nope"}, "tools[0]: spec.model: Value error, model 'nope' is not of the form"),
        (
            {"model": SCRIPTED, "tools": [{"type": "function", "name": "add"}]},
            "tools[0]: spec: tools[0]: no worker serves the function tool 'add'",
        ),
        ({"model": SCRIPTED, "id": "mine"}, "tools[0]: spec.id: a child run's id is derived"),
        ({"model": SCRIPTED, "max_steps": 0}, "tools[0]: spec.max_steps: Input should be"),
    ],
)
def test_a_bad_template_is_refused_at_submit(template: dict[str, Any], error: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve({"type": "agent", "name": "helper", "spec": template})
    assert caught.value.message.startswith(error), caught.value.message


def test_a_template_refers_only_to_fields_of_its_input_schema() -> None:
    tool = {
        "type": "agent",
        "name": "writer",
        "spec": {"model": SCRIPTED, "prompt": "Write about {{topic}} in {{style}}."},
        "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}},
    }
    with pytest.raises(SpecError, match=r"spec: \{\{style\}\} is not a field of input_schema"):
        resolve(tool)


def test_a_named_agent_comes_from_the_deployments_file(tmp_path: Path) -> None:
    agents = tmp_path / "agents.json"
    agents.write_text(json.dumps({"researcher": {"model": SCRIPTED, "system": "Research."}}))
    settings = Settings(agents=str(agents))
    (tool,) = resolve({"type": "agent", "name": "r", "agent": "researcher"}, settings)
    assert tool.config is not None
    assert tool.config.model_dump()["spec"]["system"] == "Research."
    with pytest.raises(SpecError, match="no agent named 'writer'"):
        resolve({"type": "agent", "name": "w", "agent": "writer"}, settings)


def test_a_call_fills_the_template() -> None:
    template = {"model": SCRIPTED, "system": "You write about {{topic}}.", "max_steps": 2}
    assert child_spec({"model": SCRIPTED}, {"prompt": "go"}, NONE)["prompt"] == "go"
    filled = child_spec(
        {**template, "prompt": "{{topic}}, {{words}} words"}, {"topic": "owls", "words": 50}, NONE
    )
    assert filled["system"] == "You write about owls."
    assert filled["prompt"] == "owls, 50 words"
    assert json.loads(child_spec(template, {"topic": "x"}, NONE)["prompt"]) == {"topic": "x"}


def test_a_childs_limits_are_at_most_its_parents() -> None:
    parent = RunLimits(max_tree_runs=5, max_tree_steps=50)
    template = {"model": SCRIPTED, "limits": {"max_tree_runs": 9, "max_tree_steps": 20}}
    assert child_spec(template, {}, parent)["limits"] == {"max_tree_runs": 5, "max_tree_steps": 20}
    assert child_spec({"model": SCRIPTED}, {}, NONE)["limits"] == {}


def test_a_child_template_over_a_ceiling_is_refused_at_submit() -> None:
    child = {"model": SCRIPTED, "limits": {"max_tree_steps": 2000}}
    with pytest.raises(SpecError, match=r"limits.max_tree_steps: 2000 .* ceiling of 1000"):
        resolve({"type": "agent", "name": "helper", "spec": child})


def test_a_childs_id_derives_from_its_parents_call_and_is_a_valid_run_id() -> None:
    first = child_run_id("r" * 128, 3, "call/with:odd{chars}")
    assert first == child_run_id("r" * 128, 3, "call/with:odd{chars}")
    assert first != child_run_id("r" * 128, 3, "another")
    assert RUN_ID.match(first)
