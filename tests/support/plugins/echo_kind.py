"""A tool kind from outside agentq, as a third party would write one.

`{"type": "echo", "names": ["shout"], "tag": "T"}` enables tools that answer
with their input, the entry's tag and their own name. Importing this module
registers the kind (for submitters: its entry model and resolution) and its
executor factory (for workers: `agentq worker --tools tests/support/plugins/echo_kind.py`).
Nothing in agentq names it.
"""

from __future__ import annotations

from typing import Any, Literal

from agentq.orchestrator.core.errors import ToolError, UnknownToolError
from agentq.orchestrator.tools import (
    KindConfig,
    ResolveContext,
    ToolAnnouncement,
    ToolDef,
    ToolKindPlugin,
    ToolSpecBase,
    register_tool_kind,
)
from agentq.workers.tools.assemble import WorkerOptions, register_executor
from agentq.workers.tools.base import WorkerServices
from agentq.workers.tools.context import ToolContext

SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


class EchoToolSpec(ToolSpecBase):
    type: Literal["echo"] = "echo"
    names: list[str]
    tag: str = "echo"


class EchoConfig(KindConfig):
    tag: str


class EchoKind(ToolKindPlugin):
    kind = "echo"
    spec_model = EchoToolSpec
    config_model = EchoConfig

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        served = [a for a in ctx.registry.values() if a.kind == "echo"]
        if not served:
            raise UnknownToolError(f"{ctx.where}: no worker serves echo tools")
        return [
            ToolDef(
                name=name,
                kind="echo",
                description=f"Repeats the text ({entry.tag}).",
                input_schema=SCHEMA,
                queue=served[0].queue,
                timeout_s=ctx.timeout_s,
                config=EchoConfig(tag=entry.tag),
            )
            for name in entry.names
        ]


class EchoExecutor:
    kind = "echo"
    queue: str | None = None
    keeps_runs = False

    def __init__(self) -> None:
        self.started = False

    async def start(self, services: WorkerServices | None = None) -> None:
        self.started = True

    async def announcements(self, queue: str) -> list[ToolAnnouncement]:
        return [ToolAnnouncement(name="echo", kind="echo", queue=queue, input_schema=SCHEMA)]

    async def execute(self, tool: ToolDef, input: Any, ctx: ToolContext) -> Any:
        if not self.started:
            raise ToolError("the echo executor was not started")
        assert isinstance(tool.config, EchoConfig)
        return {"tag": tool.config.tag, "tool": tool.served_name, "text": input["text"]}

    async def release_run(self, run_id: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


def echo_executor(options: WorkerOptions) -> EchoExecutor:
    return EchoExecutor()


register_tool_kind(EchoKind())
register_executor("echo", echo_executor)
