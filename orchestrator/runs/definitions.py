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
from collections.abc import Callable
from typing import TypeVar

from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.base import STORED_SPEC

T = TypeVar("T")

# Each process keeps at most KEPT texts of a kind, each at most LARGEST bytes: a spec
# carries its prompt and a tool its schema, and both come from a tenant's spec or a
# server's listing, so a text past its bound is parsed each time rather than kept (what
# a process keeps stays under ~8 MiB of specs and ~16 MiB of tools' text).
LARGEST_KEPT_SPEC = 64 * 1024
SPECS_KEPT = 128
LARGEST_KEPT_TOOL = 16 * 1024
TOOLS_KEPT = 1024


def _kept(parse: Callable[[str], T], largest: int, most: int) -> Callable[[str], T]:
    """`parse`, with the models of the last `most` texts up to `largest` bytes kept."""
    kept = functools.lru_cache(maxsize=most)(parse)
    return lambda text: parse(text) if len(text) > largest else kept(text)


def _spec(text: str) -> RunSpec:
    return RunSpec.model_validate_json(text, context=STORED_SPEC)


_stored_spec = _kept(_spec, LARGEST_KEPT_SPEC, SPECS_KEPT)
_stored_tool = _kept(ToolDef.model_validate_json, LARGEST_KEPT_TOOL, TOOLS_KEPT)


def stored_spec(text: str) -> RunSpec:
    """A spec as the store holds it (`context=STORED_SPEC`)."""
    return _stored_spec(text)


def stored_tool(text: str) -> ToolDef:
    """A tool's definition as the store holds it."""
    return _stored_tool(text)
