"""Tool calls without a run: the catalogue of callable tools, resolving a name, and the
transitions of one call (pure).

A tool is called on its own by the names its kind gives it (`ToolKindPlugin.call_entries`:
a function's name, an MCP tool's `server:tool` or its bare name, `run_python` or
`code:python`) and resolved exactly as a run spec's entry for it would be, so a call
runs on the same queue, with the same schema and executor, as the same tool in a run.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from agentq.orchestrator.calls.state import (
    CallField,
    CancelCall,
    ClaimToolCall,
    CreateCall,
    FinishCall,
)
from agentq.orchestrator.core.envelopes import JobEnvelope
from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.json_schema import validator_for
from agentq.orchestrator.core.keys import RUN_ID_PATTERN, call_job_id
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.loop.plan import CallPlan, error_result
from agentq.orchestrator.runs.state import CallStatus
from agentq.orchestrator.spec.resolution import child_spec_check
from agentq.orchestrator.tools import (
    ResolveContext,
    ToolAnnouncement,
    ToolDef,
    tool_kind,
    tool_needs,
)
from agentq.orchestrator.tools.announcements import live_registry

# A call's deadline when neither the caller nor the tool gives one (a run spec's default).
DEFAULT_CALL_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CallableTool:
    """One callable tool of the catalogue: the name it is listed under, its other names,
    and the tool entry that resolves it."""

    name: str
    aliases: tuple[str, ...]
    announcement: ToolAnnouncement
    entry: Mapping[str, Any]


def catalogue(registry: Mapping[str, ToolAnnouncement], now: float) -> dict[str, CallableTool]:
    """Every callable tool of the live registry, by each name it answers to.

    A name two tools claim goes to the one whose first name it is (a function over an
    MCP tool's bare name); two claims of equal rank make it ambiguous, and only the
    qualified names (`server:tool`) reach those tools."""
    claims: dict[str, list[tuple[int, str]]] = {}
    entries: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    announcements: dict[str, ToolAnnouncement] = {}
    for key, ann in sorted(live_registry(registry, now).items()):
        plugin = tool_kind(ann.kind)
        named = plugin.call_entries(ann) if plugin is not None else []
        if not named:
            continue
        entries[key], announcements[key] = named, ann
        for rank, (name, _) in enumerate(named):
            claims.setdefault(name, []).append((rank, key))
    owner: dict[str, str] = {}
    for name, claimants in claims.items():
        best = min(rank for rank, _ in claimants)
        winners = [key for rank, key in claimants if rank == best]
        if len(winners) == 1:
            owner[name] = winners[0]
    found: dict[str, CallableTool] = {}
    for key, named in entries.items():
        names = [name for name, _ in named if owner.get(name) == key]
        if not names:
            continue
        # Listed under a plain name when it has one (MCP clients want [A-Za-z0-9_.-]).
        listed = min(names, key=lambda n: (":" in n, names.index(n)))
        tool = CallableTool(
            name=listed,
            aliases=tuple(n for n in names if n != listed),
            announcement=announcements[key],
            entry=dict(named[[n for n, _ in named].index(names[0])][1]),
        )
        for name in names:
            found[name] = tool
    return found


def listed(tools: Mapping[str, CallableTool]) -> list[CallableTool]:
    """Each callable tool once, by its listed name."""
    unique = {t.name: t for t in tools.values()}
    return [unique[name] for name in sorted(unique)]


def resolve_call(
    name: str,
    tools: Mapping[str, CallableTool],
    registry: Mapping[str, ToolAnnouncement],
    now: float,
    *,
    timeout_s: float | None,
    settings: Settings,
) -> ToolDef:
    """The tool `name` calls, resolved as a run spec's entry for it; UnknownToolError
    (naming it) when nothing serves it."""
    found = tools.get(name)
    if found is None:
        raise UnknownToolError(f"no worker serves a tool named {name!r}")
    plugin = tool_kind(found.announcement.kind)
    assert plugin is not None  # the catalogue lists only loaded kinds
    entry = plugin.spec_model.model_validate(found.entry)
    ctx = ResolveContext(
        spec=None,
        index=0,
        registry=live_registry(registry, now),
        model_provider=None,
        timeout_s=timeout_s or entry.timeout_s or DEFAULT_CALL_TIMEOUT_S,
        settings=settings,
        check_child_spec=child_spec_check(registry, now, settings),
    )
    offered = [t for t in plugin.offer(entry, ctx) if t.served_name == found.announcement.name]
    if not offered:
        raise UnknownToolError(f"no worker serves a tool named {name!r}")
    tool = offered[0]
    if tool.name != found.name:  # listed under another name (`server:tool`)
        tool = tool.model_copy(update={"name": found.name, "source_name": tool.served_name})
    if timeout_s is not None:
        tool = tool.model_copy(update={"timeout_s": timeout_s})
    return tool


class CallInputError(SpecError):
    """The input breaks the tool's schema: each violation with its JSON pointer."""

    def __init__(self, message: str, violations: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.violations = violations


def validate_call_input(tool: ToolDef, value: Any) -> None:
    """Raise CallInputError naming each violation of the tool's input schema (the same
    JSON Schema 2020-12 check a run's calls get)."""
    from jsonschema.exceptions import SchemaError  # jsonschema loads on first use

    try:
        validator = validator_for(tool.input_schema)
    except SchemaError as exc:
        raise SpecError(f"tool {tool.name!r} has an invalid schema: {exc.message}") from None
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    if not errors:
        return
    violations = [
        {"path": "/" + "/".join(str(p) for p in e.path), "message": e.message} for e in errors[:10]
    ]
    details = "; ".join(f"{v['path']}: {v['message']}" for v in violations[:5])
    raise CallInputError(f"invalid input for tool {tool.name!r}: {details}", violations)


def call_id_for(tenant: str, idempotency_key: str | None) -> str:
    """A new call's id; with an idempotency key, the same id for the same key and tenant,
    so a retried call finds the first one."""
    if idempotency_key is None:
        return "call_" + uuid.uuid4().hex
    if not idempotency_key or len(idempotency_key) > 256:
        raise SpecError("idempotency_key: between 1 and 256 characters")
    digest = hashlib.sha256(f"{tenant}\0{idempotency_key}".encode()).hexdigest()
    call_id = "callk_" + digest[:40]
    assert RUN_ID_PATTERN.match(call_id)
    return call_id


def input_hash(tool: ToolDef, input: Any) -> str:
    canonical = json.dumps([tool.name, tool.kind, input], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def create_call_args(
    call_id: str, tool: ToolDef, input: Any, *, tenant: str, trace: Mapping[str, str]
) -> CreateCall:
    assert tool.queue is not None, "only tools that execute on a queue are callable"
    call = CallPlan(
        id=call_id,
        name=tool.name,
        input=input,
        status=CallStatus.QUEUED,
        queue=tool.queue,
        needs=tool_needs(tool),
        timeout_s=tool.timeout_s,
    )
    return CreateCall(
        call_id=call_id,
        tool=tool.model_dump_json(),
        call=call.model_dump_json(),
        input_hash=input_hash(tool, input),
        tenant=tenant,
        trace=json.dumps(dict(trace)),
        event=event_json(
            "tool-call", call_id, tool_call_id=call_id, tool_name=tool.name, input=input
        ),
        job=call_job(call, trace),
    )


def call_job(call: CallPlan, trace: Mapping[str, str]) -> QueuedJob:
    """The call's one job (on its tool's queue), from what its hash keeps: the sweeper
    rebuilds it so (orchestrator/calls/redrive.py)."""
    assert call.queue is not None, "only tools that execute on a queue are callable"
    envelope = JobEnvelope(
        kind="call",
        run_id=call.id,
        step=0,
        call_id=call.id,
        timeout_s=call.timeout_s,
        needs=call.needs,
        run_trace=dict(trace),
    )
    return queued_job(envelope, call.queue)


def claim_call_args(call_id: str, attempt: int) -> ClaimToolCall:
    return ClaimToolCall(
        call_id=call_id,
        event=event_json("tool-running", call_id, tool_call_id=call_id, attempt=attempt),
    )


def _result_event(call_id: str, result: ToolResultPart) -> str:
    if result.is_error:
        return event_json(
            "tool-error",
            call_id,
            tool_call_id=call_id,
            tool_name=result.tool_name,
            error=result.output,
            kind=result.error_kind,
        )
    return event_json(
        "tool-result",
        call_id,
        tool_call_id=call_id,
        tool_name=result.tool_name,
        output=result.output,
    )


def finish_call_args(call_id: str, result: ToolResultPart) -> FinishCall:
    return FinishCall(
        call_id=call_id, result=result.model_dump_json(), event=_result_event(call_id, result)
    )


def cancel_call_args(call_id: str, tool_name: str, reason: str) -> CancelCall:
    result = error_result(call_id, tool_name, reason, ToolErrorKind.CANCELLED)
    return CancelCall(
        call_id=call_id,
        result=result.model_dump_json(),
        event=_result_event(call_id, result),
        job_id=call_job_id(call_id),
    )


class ToolCallResult(BaseModel):
    """What a call without a run returned. A failing tool is a result with `is_error`
    (and `error`, its message), not an exception."""

    call_id: str
    tool_name: str
    output: Any = None
    is_error: bool = False
    error: str | None = None
    error_kind: ToolErrorKind | None = None
    duration_s: float = 0.0
    # Images and other media in the output, as `{"media_type", "data"}` (base64).
    media: list[dict[str, str]] = Field(default_factory=list)
    cancelled: bool = False


def media_parts(output: Any) -> list[dict[str, str]]:
    """The media parts of an output (`{"content": [...]}` or `{"artifacts": [...]}`)."""
    if not isinstance(output, dict):
        return []
    found: list[dict[str, str]] = []
    for field in ("content", "artifacts"):
        parts = output.get(field)
        if not isinstance(parts, list):
            continue
        for part in parts:
            if isinstance(part, dict) and part.get("type") == "media" and "data" in part:
                found.append(
                    {"media_type": str(part.get("media_type", "")), "data": str(part["data"])}
                )
    return found


def call_result(call_id: str, fields: Mapping[str, str]) -> ToolCallResult | None:
    """The call's result from its stored hash, or None while it has none."""
    raw = fields.get(CallField.RESULT)
    if raw is None:
        return None
    result = ToolResultPart.model_validate_json(raw)
    created = float(fields.get(CallField.CREATED_AT, "0"))
    finished = float(fields.get(CallField.FINISHED_AT, str(created)))
    error = None
    if result.is_error:
        error = result.output if isinstance(result.output, str) else json.dumps(result.output)
    return ToolCallResult(
        call_id=call_id,
        tool_name=result.tool_name,
        output=result.output,
        is_error=result.is_error,
        error=error,
        error_kind=result.error_kind,
        duration_s=max(0.0, finished - created),
        media=media_parts(result.output),
        cancelled=fields.get(CallField.CANCELLED) == "1",
    )
