"""The run state, declared once: statuses, outcomes, stored fields, and one typed input
and reply per transition. The Lua transitions use constants rendered from it. (Keys and
queued jobs are vocabulary every layer names: `core/keys.py`, `core/queued_job.py`.)

    status.py         RunStatus, CallStatus, StepAfter, InputStatus, Outcome, field names
    history.py        how the message list holds each tool output once
    inputs.py         one pydantic model per transition input
    replies.py        one pydantic model per transition reply
    failure.py        RunFailure, why a run failed
    usage.py          a run's usage and cost as its meta hash keeps them
    lua_constants.py  the constants chunk every script starts with
"""

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.queued_job import JOB_EXPIRES_MS, QueuedJob
from agentq.orchestrator.runs.state.failure import FailureKind, RunFailure
from agentq.orchestrator.runs.state.inputs import (
    INPUTS,
    BeginStep,
    CallRecord,
    Cancel,
    ClaimCall,
    CommitStep,
    CreateRun,
    Emit,
    ExpireParked,
    FailRun,
    HoldStep,
    InputAnswer,
    InputRequest,
    NodeCandidate,
    PostResult,
    RecordResult,
    Redrive,
    RedriveCall,
    ResolveApproval,
    StartQueued,
    TransitionInput,
    WorkflowFinal,
    WorkflowRecord,
)
from agentq.orchestrator.runs.state.replies import (
    BeginStepReply,
    CancelReply,
    ClaimCallReply,
    EmitReply,
    RedriveReply,
    Reply,
)
from agentq.orchestrator.runs.state.status import (
    CHILD_USAGE_FIELDS,
    COST_FIELDS,
    PARKED_CALL_STATUSES,
    TERMINAL_STATUSES,
    USAGE_FIELDS,
    CallStatus,
    InputStatus,
    MetaField,
    Outcome,
    RunStatus,
    StepAfter,
    StepField,
    call_field,
)
from agentq.orchestrator.runs.state.usage import rolled_up_usage, stored_usage

__all__ = [
    "CHILD_USAGE_FIELDS",
    "COST_FIELDS",
    "INPUTS",
    "JOB_EXPIRES_MS",
    "PARKED_CALL_STATUSES",
    "TERMINAL_STATUSES",
    "USAGE_FIELDS",
    "BeginStep",
    "BeginStepReply",
    "CallRecord",
    "CallStatus",
    "Cancel",
    "CancelReply",
    "ClaimCall",
    "ClaimCallReply",
    "CommitStep",
    "CreateRun",
    "Emit",
    "EmitReply",
    "ExpireParked",
    "FailRun",
    "FailureKind",
    "HoldStep",
    "InputAnswer",
    "InputRequest",
    "InputStatus",
    "MetaField",
    "NodeCandidate",
    "Outcome",
    "PostResult",
    "QueuedJob",
    "RecordResult",
    "Redrive",
    "RedriveCall",
    "RedriveReply",
    "Reply",
    "ResolveApproval",
    "RunFailure",
    "RunStatus",
    "StartQueued",
    "StepAfter",
    "StepField",
    "TransitionInput",
    "WorkflowFinal",
    "WorkflowRecord",
    "call_field",
    "keys",
    "rolled_up_usage",
    "stored_usage",
]
