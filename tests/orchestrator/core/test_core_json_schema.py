"""One compiled validator per schema content (core/json_schema.py): looked up on every
tool call, compiled once, and never stale for a schema changed in place."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.json_schema import validator_for

pytestmark = pytest.mark.unit


def schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }


def test_equal_schemas_share_one_compiled_validator_whatever_their_key_order() -> None:
    reordered = dict(reversed(list(schema().items())))
    assert validator_for(schema()) is validator_for(reordered)


def test_a_schema_changed_in_place_is_checked_as_it_is_now() -> None:
    changed = schema()
    assert validator_for(changed).is_valid({"a": 1, "b": 2})
    changed["properties"]["b"] = {"type": "string"}
    assert not validator_for(changed).is_valid({"a": 1, "b": 2})
    assert validator_for(changed).is_valid({"a": 1, "b": "two"})


def test_a_schema_with_non_string_keys_is_keyed_as_json_would_write_it() -> None:
    # A Python-built schema may carry an int key where JSON has a string: the same content.
    as_python: dict[Any, Any] = {"type": "object", "properties": {1: {"type": "string"}}}
    as_json = {"type": "object", "properties": {"1": {"type": "string"}}}
    assert validator_for(as_python) is validator_for(as_json)
