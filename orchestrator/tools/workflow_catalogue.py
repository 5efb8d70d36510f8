"""Published workflows: definitions the deployment publishes by name (`agentq catalog
publish --workflows DIR`), each publish of a changed definition a new version, every
version kept.

A spec names one (`{"type": "workflow", "workflow": "triage", "version": 2}`) instead of
carrying its graph: it can reach only what was published. A run freezes the definition
it resolved at submit, so a new version never changes a run in flight; keeping the old
versions lets a spec still pin one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import Field

from agentq.orchestrator.core.errors import UnknownToolError
from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.tools.base import InputSchema
from agentq.orchestrator.tools.workflow_graph import WorkflowGraph

WORKFLOW_NAME = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"


class WorkflowDefinition(SpecModel):
    """One published workflow: what a file of `--workflows DIR` holds (`name` defaults to
    the file's stem)."""

    name: str = Field(pattern=WORKFLOW_NAME)
    description: str = ""
    input_schema: InputSchema = Field(default_factory=lambda: {"type": "object"})
    graph: WorkflowGraph

    def canonical(self) -> str:
        """The text a version is stored as: equal definitions, equal texts, so publishing
        one unchanged makes no new version."""
        body = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps(body, sort_keys=True, separators=(",", ":"))


# name -> version -> definition: what submit resolves named workflows against.
PublishedWorkflows = Mapping[str, Mapping[int, WorkflowDefinition]]


def published(
    workflows: PublishedWorkflows, name: str, version: int | None
) -> tuple[int, WorkflowDefinition]:
    """The version asked for (None: the latest) and its definition; UnknownToolError
    naming what is missing."""
    versions = workflows.get(name)
    if not versions:
        raise UnknownToolError(
            f"no workflow named {name!r} is published (agentq catalog publish --workflows DIR)"
        )
    chosen = max(versions) if version is None else version
    if chosen not in versions:
        raise UnknownToolError(
            f"workflow {name!r} has no version {version} (versions 1 to {max(versions)})"
        )
    return chosen, versions[chosen]
