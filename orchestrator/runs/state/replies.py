"""One typed reply per transition. Every script returns one JSON object with an
`outcome` (an `Outcome`) and, for some transitions, data; the store parses it here."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from agentq.orchestrator.runs.state.status import Outcome, RunStatus


def _lua_list(value: Any) -> Any:
    """cjson encodes an empty Lua table as `{}`: read it as the empty list it was."""
    return [] if value == {} else value


LuaList = Annotated[list[str], BeforeValidator(_lua_list)]


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Outcome
    # With WRONG_STATE / NOT_RUNNABLE: the state the call (or request) was in instead.
    call_status: str | None = None
    # With OVER_LIMIT: the cap the tenant is at (core/tenant_limits.py) and its value.
    limit: str | None = None
    cap: int | None = None


class BeginStepReply(Reply):
    """With OK: what the model step needs, read in the same round trip."""

    # The run's spec and tools; left out ("", []) when `start` > 0: the worker that holds
    # the history's first messages holds them (written once, at create).
    spec: str = ""
    # (A factory, not `= []`: pydantic deep-copies a mutable default on every parse.)
    tools: LuaList = Field(default_factory=list)
    # The history from message `start` on (0: all of it), tool messages resolved, up to
    # its `length`; a long history to a worker that holds none of it is left out of the
    # reply (the store reads it outside the transition, see RunStore.begin_step).
    messages: LuaList = Field(default_factory=list)
    start: int = 0
    length: int = 0
    # The run's stamp (its creation time): what a worker keeps the history under, so
    # that a later run of the same id never reads this one's messages.
    stamp: str = ""
    # A child run's parent call (JSON {run_id, step, call_id}): its progress goes there.
    parent: str | None = None
    tenant: str | None = None  # whose run it is (its cost counts to that tenant)
    batch: str | None = None  # a batch line's run: its batch (its budget holds the step)


class ClaimCallReply(Reply):
    """With CLAIMED: the call (CallPlan JSON) and its tool (ToolDef JSON, if defined), or
    `tool_held`: the worker holds the run's tools (its `known_stamp` is the run's), the
    tool was not read."""

    call: str | None = None
    tool: str | None = None
    tool_held: bool = False


class RedriveReply(Reply):
    """With REDRIVEN: how many jobs were enqueued again."""

    jobs: int = 0


class EmitReply(Reply):
    seq: int = 0  # the last event's sequence number (0: the run has ended)


class CancelReply(Reply):
    status: RunStatus | None = None  # the run's status afterwards
