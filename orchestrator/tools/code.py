"""`code`: Python or JavaScript run in a sandbox container (`agentq worker --sandbox`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.tools.base import (
    KindConfig,
    ResolveContext,
    ToolAnnouncement,
    ToolDef,
    ToolKindPlugin,
    ToolSpecBase,
)

Language = Literal["python", "javascript"]


class CodeLimits(SpecModel):
    timeout_s: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    cpus: float | None = Field(default=None, gt=0)
    output_bytes: int | None = Field(default=None, gt=0)


class CodeToolSpec(ToolSpecBase):
    type: Literal["code"] = "code"
    language: Language
    name: str | None = None
    session: Literal["run", "call"] = "call"
    network: bool = False
    limits: CodeLimits = Field(default_factory=CodeLimits)

    @property
    def tool_name(self) -> str:
        return self.name or ("run_python" if self.language == "python" else "run_javascript")


class CodeToolConfig(KindConfig):
    language: Language
    session: Literal["run", "call"] = "call"
    network: bool = False
    limits: CodeLimits = Field(default_factory=CodeLimits)


def code_registry_key(language: str) -> str:
    return f"code:{language}"


class CodeKind(ToolKindPlugin):
    kind = "code"
    spec_model = CodeToolSpec
    config_model = CodeToolConfig

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        if entry.network and not ctx.settings.sandbox_allow_network:
            raise SpecError(
                f"{ctx.where}.network: this deployment does not allow network in code tools "
                "(AGENTQ_SANDBOX_ALLOW_NETWORK)"
            )
        found = ctx.registry.get(code_registry_key(entry.language))
        if found is None:
            raise UnknownToolError(
                f"{ctx.where}: no sandbox worker runs {entry.language} code "
                "(start one with `agentq worker --sandbox`)"
            )
        config = CodeToolConfig(
            language=entry.language,
            session=entry.session,
            network=entry.network,
            limits=entry.limits,
        )
        timeout_s = entry.limits.timeout_s or ctx.timeout_s
        return [
            self.described_tool(
                found, ctx, entry.tool_name, queue=found.queue, timeout_s=timeout_s, config=config
            )
        ]

    def call_entries(self, ann: ToolAnnouncement) -> list[tuple[str, dict[str, Any]]]:
        """`run_python` / `run_javascript` (as announced), also as `code:<language>`."""
        language = ann.server or ann.name
        entry = {"type": "code", "language": language}
        return [(ann.name, entry), (code_registry_key(language), entry)]

    def registry_key(self, ann: ToolAnnouncement) -> str:
        return code_registry_key(ann.server or ann.name)

    def needs(self, tool: ToolDef) -> str:
        assert isinstance(tool.config, CodeToolConfig)
        return code_registry_key(tool.config.language)
