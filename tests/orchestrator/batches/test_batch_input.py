"""Batch input lines: full specs, lines over a template, vars, custom ids, errors."""

from __future__ import annotations

import json

import pytest

from agentq.orchestrator.batches.input import (
    BatchInputError,
    duplicate_message,
    fill,
    parse_line,
    parse_lines,
)

pytestmark = pytest.mark.unit

MODEL = "openai:gpt-4o-mini"
TEMPLATE = {
    "model": MODEL,
    "system": "You triage {{team}} tickets.",
    "prompt": "Ticket: {{ticket}}",
}


def test_a_full_spec_line_is_a_run_spec() -> None:
    line = parse_line(json.dumps({"model": MODEL, "prompt": "hi", "custom_id": "a"}), 1)
    assert (line.custom_id, line.spec.prompt) == ("a", "hi")


def test_vars_fill_the_templates_prompt_and_system() -> None:
    text = json.dumps({"custom_id": 7, "vars": {"team": "billing", "ticket": 42}})
    line = parse_line(text, 3, TEMPLATE)
    assert line.custom_id == "7"
    assert line.spec.system == "You triage billing tickets."
    assert line.spec.prompt == "Ticket: 42"


def test_the_line_number_is_the_default_custom_id() -> None:
    lines = list(parse_lines(['{"prompt": "a"}', "", '{"prompt": "b"}'], {"model": MODEL}))
    assert [(b.line, b.custom_id) for b in lines] == [(1, "1"), (3, "3")]


def test_a_lines_spec_merges_into_the_template_and_prompt_replaces_it() -> None:
    text = json.dumps(
        {"spec": {"max_steps": 3, "model": {"name": "x"}}, "prompt": "plain", "vars": {}}
    )
    line = parse_line(text, 1, {"model": {"provider": "openai"}, "system": "s"})
    assert (line.spec.max_steps, line.spec.model.name, line.spec.prompt) == (3, "x", "plain")


def test_messages_replace_the_prompt() -> None:
    text = json.dumps({"messages": [{"role": "user", "content": "hey"}]})
    spec = parse_line(text, 1, {"model": MODEL}).spec
    assert spec.prompt is None
    assert spec.messages is not None


def test_metadata_is_added_to_the_lines_own() -> None:
    text = json.dumps({"prompt": "p", "spec": {"metadata": {"k": "v"}}})
    spec = parse_line(text, 1, {"model": MODEL}, {"batch": "b1"}).spec
    assert spec.metadata == {"k": "v", "batch": "b1"}


@pytest.mark.parametrize(
    ("text", "template", "message"),
    [
        ("{not json", TEMPLATE, "line 4: not JSON"),
        ("[1, 2]", TEMPLATE, "line 4: expected a JSON object"),
        ('{"custom_id": "a"}', None, "line 4: no spec and no template"),
        ('{"vars": {"team": "x"}}', TEMPLATE, "line 4: no value for {{ticket}}"),
        ('{"vars": [1]}', TEMPLATE, "line 4: 'vars' must be an object"),
        ('{"custom_id": true, "prompt": "p"}', TEMPLATE, "custom_id must be a string"),
        (json.dumps({"model": MODEL, "prompt": "p", "id": "x"}), None, "cannot set the run id"),
        (json.dumps({"model": MODEL, "max_steps": 0, "prompt": "p"}), None, "line 4: max_steps"),
    ],
)
def test_a_bad_line_is_named(text: str, template: dict[str, str] | None, message: str) -> None:
    with pytest.raises(BatchInputError, match=message.replace("{", r"\{").replace("[", r"\[")):
        parse_line(text, 4, template)


def test_fill_writes_non_text_values_as_json() -> None:
    assert fill("{{ a }} and {{b}}", {"a": [1], "b": "x"}, 1) == "[1] and x"


def test_duplicates_are_named_with_a_bound() -> None:
    message = duplicate_message([(n, 1, "x") for n in range(2, 15)], limit=2)
    assert message == (
        "duplicate custom_id: line 2 repeats line 1 ('x'), line 3 repeats line 1 ('x') and 11 more"
    )


def test_provider_batch_sets_the_lines_model_batch_flag() -> None:
    from agentq.orchestrator.batches.api import _provider_batched

    line = parse_line(json.dumps({"prompt": "p"}), 1, {"model": MODEL})
    assert _provider_batched(line).spec.model.batch is True
    assert line.spec.model.batch is False
