"""`model.options.tool_mode` is one of the modes workers speak; anything else is refused at
submit with one line naming the allowed values (it used to fall back to native tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.providers import BUILTIN_PROVIDERS
from agentq.orchestrator.policy.tool_modes import tool_mode

pytestmark = pytest.mark.unit

REFUSED = (
    r"^model\.options\.tool_mode: '(json|TEXT)' is not a tool mode "
    r"\(use one of: native, prompt, text\)$"
)


def ref(options: dict[str, Any], provider: str = "openai") -> ModelRef:
    return ModelRef.model_validate({"provider": provider, "name": "m", "options": options})


@pytest.mark.parametrize(
    ("options", "mode"),
    [
        ({}, "native"),
        ({"tool_mode": "native"}, "native"),
        ({"tool_mode": "prompt"}, "prompt"),
        ({"tool_mode": "text"}, "text"),
    ],
)
def test_the_modes_workers_speak(options: dict[str, Any], mode: str) -> None:
    assert tool_mode(options) == mode
    EndpointPolicy().resolve(ref(options), BUILTIN_PROVIDERS)


@pytest.mark.parametrize("bad", ["json", "TEXT"])
def test_an_unknown_mode_in_a_spec_is_refused(bad: str) -> None:
    with pytest.raises(SpecError, match=REFUSED):
        EndpointPolicy().resolve(ref({"tool_mode": bad}), BUILTIN_PROVIDERS)


def test_an_unknown_mode_of_a_models_file_endpoint_is_refused(tmp_path: Path) -> None:
    models = tmp_path / "models.json"
    endpoint = {"provider": "openai", "options": {"tool_mode": "json"}}
    models.write_text(json.dumps({"endpoints": {"local": endpoint}}))
    with pytest.raises(SpecError, match=REFUSED):
        EndpointPolicy.build(str(models)).resolve(ref({}, "local"), BUILTIN_PROVIDERS)
