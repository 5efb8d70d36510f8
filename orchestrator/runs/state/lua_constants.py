"""The Lua side of the declared state: a chunk of constants rendered from the Python
definitions at load time and prepended to every transition script.

Scripts say `RUN.AWAITING`, `S.CALL_STATUS`, `OUT.STALE` instead of string literals,
so renaming a status or a field here renames it everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import StrEnum

from agentq.orchestrator.core import fairness, keys, tenant_limits
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.core.tool_errors import OnError
from agentq.orchestrator.runs.state import status
from agentq.orchestrator.runs.state.failure import FailureKind
from agentq.orchestrator.runs.state.history import (
    HISTORY_INLINE_MAX,
    REF_ORDER_MAX_BYTES,
    TOOL_RESULTS_REF,
    tool_message_frame,
)

# Tables of the chunk, by Lua name.
# The `finish` event's field that carries a run's structured output (core/events.py: Finish).
FINISH_OUTPUT = "output"
RUNNING_TOOL = "tool_name"  # the tool-running event's field (core/events.py: ToolRunning)

ENUM_TABLES: dict[str, type[StrEnum]] = {
    "RUN": status.RunStatus,
    "CALL": status.CallStatus,
    "AFTER": status.StepAfter,
    "INPUT": status.InputStatus,
    "OUT": status.Outcome,
    "F": status.MetaField,
    "S": status.StepField,
    "ON_ERROR": OnError,
    "FAILURE": FailureKind,
}

KEY_CONSTANTS: dict[str, str] = {
    "MESSAGES": keys.MESSAGES_SUFFIX,
    "EVENTS": keys.EVENTS_SUFFIX,
    "TOOLS": keys.TOOLS_SUFFIX,
    "ENDED": keys.ENDED_SUFFIX,
    "TIMERS": keys.TIMERS_SUFFIX,
    "STEP": keys.STEP_INFIX,
    "ANSWER": keys.ANSWER_INFIX,
    "WORKFLOW": keys.WORKFLOW_INFIX,
    "WORKFLOW_SEPARATOR": keys.WORKFLOW_SEPARATOR,
    "RUN_ENDED": keys.RUN_ENDED,
    "RUN_ENDED_TO": keys.RUN_ENDED_TO,
    "ARQ_JOB": keys.ARQ_JOB_PREFIX,
    "ARQ_IN_PROGRESS": keys.ARQ_IN_PROGRESS_PREFIX,
    "MOVING_PREFIX": keys.MOVING_PREFIX,
    "MOVING_RUNS": keys.MOVING_RUNS,
    "MOVING_CALLS": keys.MOVING_CALLS,
    "MOVING_BATCHES": keys.MOVING_BATCHES,
    "USAGE_PREFIX": keys.USAGE_PREFIX,
    "DEFAULT_TENANT": DEFAULT_TENANT,
    "USAGE_TENANTS": keys.USAGE_TENANTS,
    "USAGE_BATCHES": keys.USAGE_BATCHES,
    "BUDGETS_PREFIX": keys.BUDGETS_PREFIX,
    "BUDGETS_HELD": keys.BUDGETS_HELD,
    "TENANTS_PREFIX": keys.TENANTS_PREFIX,
    "TENANT_LOAD": keys.TENANT_LOAD,
    "TENANT_IN_FLIGHT": keys.TENANT_IN_FLIGHT,
    "TENANT_QUEUED": keys.TENANT_QUEUED,
    "CALL_PREFIX": keys.CALL_PREFIX,
    "TAG_CLOSE": keys.TAG_CLOSE,
    "RUN_PREFIX": keys.RUN_PREFIX,
    "JOB_PREFIX": keys.JOB_PREFIX,
    "JOB_SEPARATOR": keys.JOB_SEPARATOR,
    "MODEL_JOB": keys.MODEL_JOB_SUFFIX,
    "CALL_JOB": keys.CALL_JOB_INFIX,
}


def _lua_str(value: str) -> str:
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"not a plain ASCII constant: {value!r}")
    return json.dumps(value)  # for printable ASCII, JSON's escapes are Lua's


def _table(name: str, items: Iterable[tuple[str, str]]) -> str:
    body = ", ".join(f"{k} = {_lua_str(v)}" for k, v in items)
    return f"local {name} = {{{body}}}"


def _enum_items(enum: type[StrEnum]) -> Iterable[tuple[str, str]]:
    return ((member.name, member.value) for member in enum)


def render(
    tables: Mapping[str, type[StrEnum]] | None = None,
    key_tables: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The run chunk, then a machine's own enum `tables` and `key_tables` (a call's or a
    batch's scripts read the run's job layout too)."""
    lines = ["-- Generated from agentq.orchestrator.runs.state at load time: do not edit by hand."]
    enums = {**ENUM_TABLES, **(tables or {})}
    lines += [_table(name, _enum_items(enum)) for name, enum in enums.items()]
    lines.append(_table("K", KEY_CONSTANTS.items()))
    lines += [_table(name, table.items()) for name, table in (key_tables or {}).items()]
    for name, table in (
        ("USAGE", status.USAGE_FIELDS),
        ("CHILD_USAGE", status.CHILD_USAGE_FIELDS),
        ("COST", status.COST_FIELDS),
        ("CHILD_COST", status.CHILD_COST_FIELDS),
    ):
        pairs = ", ".join(f"{{{_lua_str(k)}, {_lua_str(v)}}}" for k, v in table.items())
        lines.append(f"local {name} = {{{pairs}}}  -- {{Usage field, meta field}}")
    open_, close = tool_message_frame()
    lines.append(
        f"local TOOL_MESSAGE_OPEN, TOOL_MESSAGE_CLOSE = {_lua_str(open_)}, {_lua_str(close)}"
    )
    lines.append(f"local TOOL_RESULTS_REF = {_lua_str(TOOL_RESULTS_REF)}")
    lines.append(f"local REF_ORDER_MAX_BYTES = {int(REF_ORDER_MAX_BYTES)}")
    # The finish event's structured output, spliced in as stored (prelude.lua: finish_run).
    lines.append(f"local OUTPUT_MEMBER = {_lua_str(',' + json.dumps(FINISH_OUTPUT) + ':')}")
    # A claim's `tool-running` event gets its tool's name spliced in (claim_call.lua).
    lines.append(f"local TOOL_NAME_MEMBER = {_lua_str(',' + json.dumps(RUNNING_TOOL) + ':')}")
    # A call's record names its tool's on_error as this JSON string (prelude.lua: tool_failure).
    lines.append(f"local FAIL_RUN_VALUE = {_lua_str(json.dumps(OnError.FAIL_RUN.value))}")
    lines.append(f"local HISTORY_INLINE_MAX = {int(HISTORY_INLINE_MAX)}")
    limits = {"MAX_IN_FLIGHT": tenant_limits.MAX_IN_FLIGHT, "MAX_QUEUED": tenant_limits.MAX_QUEUED}
    lines.append(_table("LIMIT", limits.items()))
    lines.append(fairness.lua_chunk().rstrip("\n"))
    return "\n".join(lines) + "\n"
