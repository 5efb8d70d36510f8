"""`remote`: a tool executed by a service in any language, over HTTP.

The deployment declares each remote tool and the queue its calls go to (a remote-tools
file, `AGENTQ_REMOTE_TOOLS`); `agentq serve` announces them. A run spec only names one
(`{"type": "remote", "name": "resize"}`): it never picks a queue or a URL. The calls are
ordinary tool-call jobs on that queue, leased over HTTP (`agentq serve`'s
`/v1/queues/{queue}/lease`) or pushed to the queue's webhook, with the same leases,
re-delivery and write-once results as any worker's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.tools.base import (
    InputSchema,
    ResolveContext,
    ToolAnnouncement,
    ToolDef,
    ToolKindPlugin,
    ToolName,
    ToolSpecBase,
)

QUEUE_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class RemoteToolSpec(ToolSpecBase):
    """Enables a remote tool the deployment declared, by its name."""

    type: Literal["remote"] = "remote"
    name: str


class _Declared(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RemoteToolDecl(_Declared):
    """One remote tool as the deployment declares it."""

    type: Literal["remote"] = "remote"
    name: ToolName
    description: str = ""
    input_schema: InputSchema = Field(default_factory=lambda: {"type": "object"})
    queue: str = Field(pattern=QUEUE_PATTERN)

    def announcement(self) -> ToolAnnouncement:
        return ToolAnnouncement(
            name=self.name,
            kind="remote",
            queue=self.queue,
            description=self.description,
            input_schema=self.input_schema,
        )


class PushWebhook(_Declared):
    """Where agentq pushes a queue's calls; the signing secret is read from the named
    variable of the pushing process's environment."""

    url: str = Field(pattern=r"^https?://")
    secret_env: str = Field(pattern=ENV_NAME_PATTERN)
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    max_attempts: int = Field(default=5, ge=1, le=20)
    # Waits between attempts: backoff_s, twice that, … (at most 60 s).
    backoff_s: float = Field(default=1.0, ge=0, le=60)
    # How many calls of the queue are pushed at once.
    concurrency: int = Field(default=16, ge=1, le=1000)


class RemoteTools(_Declared):
    """The remote-tools file: `{"tools": [...], "webhooks": {"QUEUE": {"url", "secret_env"}}}`."""

    tools: list[RemoteToolDecl] = Field(default_factory=list)
    webhooks: dict[str, PushWebhook] = Field(default_factory=dict)

    @property
    def queues(self) -> set[str]:
        return {t.queue for t in self.tools}


def load_remote_tools(path: str | None) -> RemoteTools:
    """The deployment's remote tools; empty without a file. A bad file is a SpecError
    naming the file and the field."""
    if not path:
        return RemoteTools()
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        declared = RemoteTools.model_validate(raw)
    except (OSError, ValueError) as exc:
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SpecError(f"remote tools file {path!r}: {where}: {first['msg']}") from None
        raise SpecError(f"cannot read remote tools file {path!r}: {exc}") from None
    unknown = sorted(set(declared.webhooks) - declared.queues)
    if unknown:
        raise SpecError(f"remote tools file {path!r}: webhook for unknown queue {unknown[0]!r}")
    return declared


class RemoteKind(ToolKindPlugin):
    kind = "remote"
    spec_model = RemoteToolSpec
    executed_by_worker = False  # a service posts its result

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        found = ctx.registry.get(remote_registry_key(entry.name))
        if found is None:
            raise UnknownToolError(
                f"{ctx.where}: the deployment declares no remote tool {entry.name!r} "
                "(AGENTQ_REMOTE_TOOLS)"
            )
        return [self.described_tool(found, ctx, entry.name, queue=found.queue)]

    def describe(self, entry: Any) -> str:
        return f"the remote tool {entry.name!r}"

    def call_entries(self, ann: ToolAnnouncement) -> list[tuple[str, dict[str, Any]]]:
        # A call without a run is a `call` job on the tool's queue, leased or pushed
        # like a run's (`workers.remote_leases`).
        return [(ann.name, {"type": "remote", "name": ann.name})]


def remote_registry_key(name: str) -> str:
    return f"remote:{name}"
