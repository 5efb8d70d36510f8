"""The state of a tool call without a run (`client.calls.call`), declared once.

A call is one hash `aq:call:{<id>}` (fields below) and an event stream beside it. It
moves queued -> running -> done (the `CallStatus` of a run's calls); its result is
written once, by whichever comes first of the worker's result and a cancellation, so a
re-delivered job never executes a call whose result is recorded, and a retried
`call_tool` with the same idempotency key finds the first call and its result.

One typed input per transition (`call_*.lua`, after `call_prelude.lua`), read by the
scripts as `A.<field>` exactly as the run transitions read theirs.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, model_validator

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.machine.transition import Transition
from agentq.orchestrator.runs.state.status import Outcome


class CallField(StrEnum):
    """Fields of a call's hash `aq:call:{<id>}`."""

    TOOL = "tool"  # the resolved ToolDef JSON (its schema, queue, timeout)
    CALL = "call"  # the CallPlan JSON (id, name, input)
    INPUT_HASH = "input_hash"  # sha256 of tool + input: a reused key with other input conflicts
    STATUS = "status"  # a CallStatus: queued, running, done
    RESULT = "result"  # ToolResultPart JSON, written once
    CANCELLED = "cancelled"  # "1" when a cancellation wrote the result
    TENANT = "tenant"
    TRACE = "trace"  # W3C carrier JSON of the call's trace (the caller's, when it sent one)
    CREATED_AT = "created_at"
    STARTED_AT = "started_at"
    FINISHED_AT = "finished_at"


class CallTransitionInput(Transition):
    """What every call transition reads: which call. How long it is kept,
    `retention_s`, is the store's to add (machine/store.py), once, from its settings."""

    call_id: str


class CreateCall(CallTransitionInput):
    script = "call_create"

    tool: str  # ToolDef JSON
    call: str  # CallPlan JSON
    input_hash: str
    tenant: str
    trace: str
    event: str
    job: QueuedJob


class ClaimToolCall(CallTransitionInput):
    script = "call_claim"

    event: str


class FinishCall(CallTransitionInput):
    script = "call_finish"

    result: str  # ToolResultPart JSON
    event: str


class CancelCall(CallTransitionInput):
    script = "call_cancel"

    result: str  # the cancellation as the call's (error) result
    event: str
    job_id: str  # asked to abort
    # The abort set of the job's partition (its slot), from the key builders.
    abort_key: str = ""

    @model_validator(mode="after")
    def _abort_key_of_job(self) -> CancelCall:
        self.abort_key = self.abort_key or keys.abort_set_of(self.job_id)
        return self


class EmitCall(CallTransitionInput):
    script = "call_emit"

    events: list[str]


class RedriveCallJob(CallTransitionInput):
    """The sweeper found the call unmoved and not done: its job, enqueued again unless
    it is queued or held (orchestrator/calls/redrive.py)."""

    script = "call_redrive"

    job: QueuedJob | None = None  # None: the call was not found (it leaves the index)


CALL_INPUTS: tuple[type[CallTransitionInput], ...] = (
    CreateCall,
    ClaimToolCall,
    FinishCall,
    CancelCall,
    EmitCall,
    RedriveCallJob,
)


class CallReply(BaseModel):
    """Every call transition's reply: its outcome and, by outcome, data."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Outcome
    call_status: str | None = None  # EXISTS: the first call's status
    call: str | None = None  # CLAIMED: the CallPlan JSON
    tool: str | None = None  # CLAIMED: the ToolDef JSON
    seq: int = 0  # EMITTED: the last event's sequence (0: the call had ended)
    jobs: int = 0  # REDRIVEN: how many jobs were enqueued again
