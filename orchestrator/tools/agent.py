"""`agent`: a sub-agent. A call starts a child run from a spec template; the call parks
(holding no worker) until the child ends, and the child's final text is its result.

The template is a RunSpec without `prompt` (the call's `prompt` fills it in) or with
`{{field}}` references to the fields of `input_schema`. It is checked at submit like a
top-level spec (shape and tools), and the child spec it yields is submitted through the
same path as any run, so it is untrusted input exactly like one (orchestrator/runs/children.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError, model_validator

from agentq.orchestrator.core.envelopes import MODEL_QUEUE
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.templating import references, root
from agentq.orchestrator.tools.base import (
    KindConfig,
    ResolveContext,
    ToolDef,
    ToolKindPlugin,
    ToolName,
    ToolSpecBase,
    refuse,
)

# The input a sub-agent takes when its tool gives no input_schema.
DEFAULT_AGENT_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "The task for the sub-agent."}},
    "required": ["prompt"],
    "additionalProperties": False,
}


class AgentToolSpec(ToolSpecBase):
    type: Literal["agent"] = "agent"
    name: ToolName
    description: str = ""
    spec: dict[str, Any] | None = None  # a RunSpec template
    agent: str | None = None  # a named agent of the deployment (AGENTQ_AGENTS)
    input_schema: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> AgentToolSpec:
        if (self.spec is None) == (self.agent is None):
            raise ValueError("an agent tool needs exactly one of 'spec' or 'agent'")
        return self


class AgentToolConfig(KindConfig):
    spec: dict[str, Any]


def named_agents(path: str | None) -> dict[str, dict[str, Any]]:
    if not path:
        return {}
    agents: dict[str, dict[str, Any]] = json.loads(Path(path).read_text())
    return agents


def check_template(template: dict[str, Any], ctx: ResolveContext, where: str) -> None:
    """The template as a child spec would be: a valid RunSpec whose tools resolve."""
    if "id" in template:
        raise refuse(ctx, f"{where}.id: a child run's id is derived from its parent's call")
    probe = dict(template)
    if probe.get("prompt") is None and not probe.get("messages"):
        probe["prompt"] = "(the call's prompt)"
    try:
        ctx.check_child_spec(probe)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise refuse(ctx, f"{where}.{loc}: {first['msg']}") from None
    except SpecError as exc:
        raise refuse(ctx, f"{where}: {exc.message}") from None


class AgentKind(ToolKindPlugin):
    kind = "agent"
    spec_model = AgentToolSpec
    config_model = AgentToolConfig
    executed_by_worker = False  # a child run answers it

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        template = entry.spec
        where = "spec"
        if template is None:
            template = named_agents(ctx.settings.agents).get(entry.agent)
            where = "agent"
            if template is None:
                raise refuse(ctx, f"agent: this deployment has no agent named {entry.agent!r}")
        check_template(template, ctx, where)
        schema = entry.input_schema or DEFAULT_AGENT_INPUT
        fields = set(schema.get("properties", {}))
        for ref in references(template):
            if root(ref) not in fields:
                raise refuse(ctx, f"{where}: {{{{{ref}}}}} is not a field of input_schema")
        return [
            self.described_tool(
                entry,
                ctx,
                entry.name,
                input_schema=schema,
                start_queue=MODEL_QUEUE,
                config=AgentToolConfig(spec=template),
            )
        ]
