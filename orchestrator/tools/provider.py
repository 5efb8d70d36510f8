"""`provider`: a tool the model provider runs itself (web search, …)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentq.orchestrator.tools.base import (
    KindConfig,
    ResolveContext,
    ToolDef,
    ToolKindPlugin,
    ToolSpecBase,
    refuse,
)


class ProviderToolSpec(ToolSpecBase):
    """A tool the model provider executes itself (e.g. web search)."""

    type: Literal["provider"] = "provider"
    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class ProviderToolConfig(KindConfig):
    options: dict[str, Any] = Field(default_factory=dict)


class ProviderKind(ToolKindPlugin):
    kind = "provider"
    spec_model = ProviderToolSpec
    config_model = ProviderToolConfig
    renamable = False  # the provider knows its tools by their own names
    executed_by_worker = False  # the provider runs it

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        provider = ctx.model_provider
        offered = provider.provider_tools if provider is not None else frozenset()
        if entry.name not in offered:
            name = provider.name if provider is not None else ctx.spec.model.provider
            known = ", ".join(sorted(offered)) or "none"
            raise refuse(
                ctx, f"the {name!r} provider cannot run {entry.name!r} itself (it offers: {known})"
            )
        return [
            ToolDef(
                name=entry.name,
                kind="provider",
                timeout_s=ctx.timeout_s,
                config=ProviderToolConfig(options=entry.options),
            )
        ]
