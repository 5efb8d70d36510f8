"""A run's stored definitions (its spec, its tools') as models, parsed once per text.

What a run was submitted with is written once at create and never rewritten; a model
step that does not hold the run's history reads its spec and tools, and every tool call
its tool's definition. The runs a deployment serves share their tools' definitions (and
runs of one template their spec), so a process keeps the models it parsed by their text:
the same text validated by the same contract is the same model. A text that fails is
refused each time it is read (a failure is not kept).

The models are shared, as a run's history already shares them between its steps: nothing
changes a stored definition's model in place (a change is a `model_copy`).
"""

from __future__ import annotations

import functools

from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.base import STORED_SPEC

# A spec carries its prompt: one past this is parsed each time rather than kept, so what
# the process keeps stays under ~SPECS_KEPT x LARGEST_KEPT_SPEC bytes of text.
LARGEST_KEPT_SPEC = 64 * 1024
SPECS_KEPT = 128
TOOLS_KEPT = 1024


def stored_spec(text: str) -> RunSpec:
    """A spec as the store holds it (`context=STORED_SPEC`)."""
    if len(text) > LARGEST_KEPT_SPEC:
        return _spec(text)
    return _kept_spec(text)


@functools.lru_cache(maxsize=TOOLS_KEPT)
def stored_tool(text: str) -> ToolDef:
    """A tool's definition as the store holds it."""
    return ToolDef.model_validate_json(text)


def _spec(text: str) -> RunSpec:
    return RunSpec.model_validate_json(text, context=STORED_SPEC)


_kept_spec = functools.lru_cache(maxsize=SPECS_KEPT)(_spec)
