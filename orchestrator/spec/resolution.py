"""Tool routing: what workers announce, and how a spec's tools resolve against it.

A worker announces every tool it serves (name, kind, schema, queue). At submit,
`resolve_tools` turns the spec's tool entries into frozen `ToolDef`s: each
entry's kind offers its tools (orchestrator/tools/), then the wrappers
every kind gets apply (filter, prefix, approval). The schema the model sees is
the schema calls are validated against, whatever workers announce later.
Resolution is pure; the registry snapshot is read by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.output.instructions import OUTPUT_TOOL
from agentq.orchestrator.policy.approval_rules import ApprovalHook, ApprovalWhen
from agentq.orchestrator.policy.providers import ProviderInfo, provider_table
from agentq.orchestrator.policy.stop_conditions import HasToolCall, OutputValid, leaves
from agentq.orchestrator.spec.limits import check_limits
from agentq.orchestrator.spec.run import RunSpec, ToolChoiceTool
from agentq.orchestrator.tools import (
    ResolveContext,
    ToolAnnouncement,
    ToolDef,
    ToolKindPlugin,
    tool_kind,
)
from agentq.orchestrator.tools.announcements import announced_providers, live_registry
from agentq.orchestrator.tools.base import ToolSpecBase
from agentq.orchestrator.tools.workflow_catalogue import PublishedWorkflows


def resolve_tools(
    spec: RunSpec,
    registry: Mapping[str, ToolAnnouncement],
    now: float,
    *,
    model_provider: ProviderInfo | None = None,
    settings: Settings | None = None,
    workflows: PublishedWorkflows | None = None,
) -> list[ToolDef]:
    """Resolve the spec's tools against the live registry, or raise a SpecError.

    `model_provider`: where the run's model goes (default: the provider the spec
    names, from the built-in and announced providers). `settings`: the deployment's,
    for what it lets a spec choose (default: read from the environment). `workflows`:
    the published workflows a workflow entry may name (default: none)."""
    published = workflows or {}
    deployment = settings or Settings()
    live = live_registry(registry, now)
    if model_provider is None:
        model_provider = provider_table(announced_providers(live)).get(spec.model.provider)
    resolved: list[ToolDef] = []
    for index, entry in enumerate(spec.tools):
        plugin = tool_kind(entry.type)
        if plugin is None:  # the spec was parsed where the kind was loaded, not here
            raise UnknownToolError(f"tools[{index}]: unknown tool type {entry.type!r}")
        ctx = ResolveContext(
            spec=spec,
            index=index,
            registry=live,
            model_provider=model_provider,
            timeout_s=entry.timeout_s or spec.tool_timeout_s,
            settings=deployment,
            check_child_spec=child_spec_check(registry, now, deployment, published),
            workflows=published,
        )
        resolved.extend(_wrapped(plugin, entry, ctx))
    check_tool_references(spec, resolved)
    return resolved


def child_spec_check(
    registry: Mapping[str, ToolAnnouncement],
    now: float,
    settings: Settings,
    workflows: PublishedWorkflows | None = None,
) -> Callable[[dict[str, Any]], None]:
    """The check a sub-agent's child spec gets: a valid RunSpec whose tools resolve
    against the same registry (ValidationError or SpecError otherwise)."""

    def check(template: dict[str, Any]) -> None:
        spec = RunSpec.model_validate(template)
        check_limits(spec.limits, settings)
        resolve_tools(spec, registry, now, settings=settings, workflows=workflows)

    return check


def _wrapped(plugin: ToolKindPlugin, entry: ToolSpecBase, ctx: ResolveContext) -> list[ToolDef]:
    """The entry's tools with the wrappers every kind gets: filtered, prefixed, approval."""
    offered = {t.name: t for t in plugin.offer(entry, ctx)}
    chosen = list(offered.values())
    if entry.tools is not None:
        missing = [name for name in entry.tools if name not in offered]
        if missing:
            raise UnknownToolError(
                f"{ctx.where}: {plugin.describe(entry)} has no tool named {missing[0]!r}"
            )
        chosen = [offered[name] for name in entry.tools]
    if entry.prefix is not None and not plugin.renamable:
        raise SpecError(f"{ctx.where}.prefix: {plugin.kind} tools keep their own names")
    if entry.to_model_output is not None and not plugin.executed_by_worker:
        raise SpecError(
            f"{ctx.where}.to_model_output: {plugin.kind} tools' results do not pass through "
            "a worker, so nothing converts them"
        )
    out: list[ToolDef] = []
    for tool in chosen:
        own = tool.name
        name = (
            entry.prefix + own
            if entry.prefix is not None
            else plugin.exposed_name(entry, tool, ctx)
        )
        approval = entry.needs_approval
        rule = approval if isinstance(approval, ApprovalWhen | ApprovalHook) else None
        if isinstance(approval, list):
            needs = own in approval or name in approval
        else:
            needs = approval is True
        update: dict[str, object] = {
            "name": name,
            "needs_approval": needs,
            "approval_rule": rule,
            "park_timeout_s": entry.park_timeout_s,
            "retry": entry.retry,
            "coerce": entry.coerce,
            "max_output_bytes": entry.max_output_bytes,
            "on_error": entry.on_error,
            "to_model_output": entry.to_model_output or tool.to_model_output,
        }
        if name != own:
            update["source_name"] = tool.served_name
        out.append(tool.model_copy(update=update))
    if isinstance(entry.needs_approval, list):
        names = {t.name for t in out} | {t.served_name for t in out}
        unknown = [n for n in entry.needs_approval if n not in names]
        if unknown:
            raise SpecError(f"{ctx.where}.needs_approval: {unknown[0]!r} is not one of its tools")
    return out


def check_tool_references(spec: RunSpec, tools: list[ToolDef]) -> None:
    """Names used by tool_choice, active_tools and stop_when must be tools of the run (and
    the output `output_valid` names, the run's)."""
    names = [t.name for t in tools]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SpecError(
                f"tools: two tools are named {name!r}; give one a different name or prefix"
            )
        seen.add(name)
    if spec.output is not None and OUTPUT_TOOL in seen:
        raise SpecError(f"tools: {OUTPUT_TOOL!r} is the final-answer tool of a run with 'output'")
    if isinstance(spec.tool_choice, ToolChoiceTool) and spec.tool_choice.tool not in seen:
        raise SpecError(f"tool_choice: {spec.tool_choice.tool!r} is not a tool of this run")
    for name in spec.active_tools or []:
        if name not in seen:
            raise SpecError(f"active_tools: {name!r} is not a tool of this run")
    for where, cond in leaves(spec.stop_when):
        if isinstance(cond, HasToolCall) and cond.has_tool_call not in seen:
            raise SpecError(
                f"{where}.has_tool_call: {cond.has_tool_call!r} is not a tool of this run"
            )
        if isinstance(cond, OutputValid) and spec.output is None:
            raise SpecError(f"{where}.output_valid: the run has no 'output' to be valid")
