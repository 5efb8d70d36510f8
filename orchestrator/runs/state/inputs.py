"""One typed input per transition: exactly what its Lua script may read as `A.<field>`.

The store sends an input as the script's single ARGV (JSON, nulls left out, since
cjson turns JSON null into a truthy sentinel). `tests/orchestrator/runs/test_core_state_contract.py`
checks every `A.<field>` a script reads against its input model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentq.orchestrator.concurrency.slots import Slot
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.fairness import Lane
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.core.tenant_limits import TenantLoad
from agentq.orchestrator.machine.transition import SentJob, Spilled, Transition
from agentq.orchestrator.runs.state.failure import RunFailure
from agentq.orchestrator.runs.state.status import CallStatus, InputStatus, StepAfter

DEFAULT_RETENTION_S = 7 * 24 * 3600
# How long an answer to an input request waits for the call that asked.
ANSWER_TTL_S = 3600


class TransitionInput(Transition):
    """What every run transition reads: whose run. How long an ended run is kept,
    `retention_s`, is the store's to add (machine/store.py), once, from its settings."""

    run_id: str
    # The wake-up list a worker sending this transition claims from in the same round
    # trip (machine/store.py: `Ride.takes_from`): the first ready job enqueued there
    # pushes no wake-up token (enqueue.lua).
    rider_wake: str | None = None


class CreateRun(TransitionInput):
    script = "create"

    spec: str
    # sha256 of the canonical spec JSON: a resubmission with another spec is refused.
    spec_hash: str
    tools: dict[str, str]  # name -> ToolDef JSON
    tool_order: list[str]
    messages: list[str]
    trace: str
    event: str
    next_job: QueuedJob
    # Where its jobs wait their turn (core/fairness.py): written before its first job.
    lane: Lane = Field(default_factory=Lane)
    # Its concurrency key's slot (orchestrator/concurrency/), read by the claim.
    slot: Slot | None = None
    # Enqueued when the run ends, however it ends (a batch admits its next line from it).
    end_job: QueuedJob | None = None
    # A child run (a sub-agent's): its parent's call (JSON {run_id, step, call_id}), the
    # job its end enqueues to answer that call, and its depth below the top run.
    parent: str | None = None
    parent_job: QueuedJob | None = None
    depth: int = 0
    tenant: str | None = None  # whose run it is: its steps' usage counts to that tenant
    # A batch line's run: its batch's id (its steps' usage counts to the batch's budget).
    batch: str | None = None
    # A fork starts at `start_step` with the original's first steps copied (their step
    # hashes, field -> value), its usage so far, and where it came from (JSON).
    start_step: int = 0
    steps: list[dict[str, str]] = Field(default_factory=list)
    usage: Usage | None = None
    n_initial: int | None = None
    origin: str | None = None
    # A delayed run: when it starts (ms since the epoch). It is created `scheduled`, its
    # first model job a timer due then (one of the run's timers: a cancel drops it).
    start_at_ms: int | None = None
    # A limited tenant's run: counted (and maybe refused) under its tenant's caps.
    tenant_load: TenantLoad | None = None
    # A run queued on its thread: created `queued`, its first model job held until
    # `start_queued` hands it the thread's history.
    hold: bool = False


class StartQueued(TransitionInput):
    script = "start_queued"

    history: list[str]  # the thread's history (message JSON), before the run's own


class BeginStep(TransitionInput):
    script = "begin_step"

    step: int
    event: Spilled
    # What the worker holds of the run already (workers/steps/history_cache.py): its spec,
    # tools and first `known` messages, read while the run's stamp was `known_stamp`.
    # The reply then carries only the messages after those; with another stamp (another
    # run of the same id) or more than the run has, it carries it all.
    known: int = Field(default=0, ge=0)
    known_stamp: str | None = None


class HoldStep(TransitionInput):
    """A begun step that a shared budget holds (orchestrator/budgets/): it starts no model
    call; the budget's raise (or the sweeper, `recheck_ms` later) sends its job again."""

    script = "hold_step"

    step: int
    scope: str  # the budget's scope id (budgets/shared.py: Scope.id)
    event: str  # the `step-held` event, sent once per hold
    recheck_ms: int = Field(ge=0)


class CallRecord(BaseModel):
    """One of the step's own calls as the commit stores it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    call: Spilled  # CallPlan JSON
    status: CallStatus
    result: Spilled | None = None  # ToolResultPart JSON, when answered at once


class CommitStep(TransitionInput):
    script = "commit_step"

    step: int
    resp: Spilled
    assistant: Spilled
    text: str
    finish_reason: str
    usage: Usage
    after: StepAfter
    order: str  # JSON list of call ids
    calls: list[CallRecord]
    events: list[Spilled]
    jobs: list[SentJob]  # tool jobs, and deferred expiry jobs of parked calls
    pending: int
    parked: int
    finishes_now: bool
    # The next step's job, sent only when the commit joins (the step finishes nothing and
    # leaves nothing pending); otherwise the last result's transition sends it.
    next_job: SentJob | None = None
    # Answered through a provider batch API: counted apart as batch-priced usage.
    batch: bool = False
    # The run's structured output (JSON) when this step gave a valid one, and messages
    # that follow the assistant's (an invalid output sent back to the model).
    output: str | None = None
    follow: list[str] = Field(default_factory=list)
    # The run fails once the step is recorded (a budget the step went over: RunFailure).
    failure: RunFailure | None = None
    # The windows of the tenant's periodic budget the step's usage counts in too (keys.py:
    # tenant_window_usage), and how long their totals are kept.
    windows: list[str] = Field(default_factory=list)
    window_ttl_s: int = 0


class ClaimCall(TransitionInput):
    script = "claim_call"

    step: int
    call_id: str
    event: Spilled
    # The run's stamp under which the worker holds its tools (the history it read for a
    # model step of the run, workers/steps/history_cache.py): the tool is not read then.
    # Tools are written once, at create, and a later run of the id has another stamp.
    known_stamp: str | None = None


class RecordResult(TransitionInput):
    """A tool job's result (or error)."""

    script = "record_result"

    step: int
    call_id: str
    result: Spilled  # ToolResultPart JSON
    events: list[Spilled]
    next_job: SentJob


class PostResult(RecordResult):
    """A result posted from outside for a call awaiting one (a client tool)."""

    script = "post_result"

    # A child run's usage, added to the parent's children's totals with the result.
    child_usage: Usage | None = None


class ExpireParked(RecordResult):
    """A parked call's deadline passed: its (error) result, unless it was resolved."""

    script = "expire_parked"


class ResolveApproval(TransitionInput):
    script = "resolve_approval"

    step: int
    call_id: str
    approved: bool
    event: str
    # Approved: the call's next status, and its job when it runs on a queue; the call's
    # record with the approver's input, when they edited it.
    next_status: CallStatus | None = None
    job: QueuedJob | None = None
    call: str | None = None
    # Denied: the denial as the call's (error) result.
    result: str | None = None
    events: list[str] = Field(default_factory=list)
    next_job: QueuedJob | None = None

    @model_validator(mode="after")
    def _complete(self) -> ResolveApproval:
        """Refused here, not half-applied in Lua: each branch carries what it writes."""
        if self.approved:
            if self.next_status is None:
                raise ValueError("an approval needs the call's next status")
            if self.next_status == CallStatus.QUEUED and self.job is None:
                raise ValueError("an approval of a queued call needs its job")
        elif self.result is None or self.next_job is None:
            raise ValueError("a denial needs its result and the next step's job")
        elif self.call is not None:
            raise ValueError("a denial keeps the call's input")
        return self


class InputRequest(TransitionInput):
    script = "input_request"

    step: int
    call_id: str  # the asking call: it must be running
    request_id: str
    request: str  # JSON: tool_call_id, tool_name, message, schema
    event: str


class InputAnswer(TransitionInput):
    script = "input_answer"

    step: int
    request_id: str
    outcome: InputStatus
    answer: str | None = None  # JSON handed to the waiting call (None when expired)
    answer_ttl_s: int = ANSWER_TTL_S
    event: str


class Emit(TransitionInput):
    script = "emit"

    events: list[str]
    # Append even to an ended run: reports about the run's delivery (webhook-failed),
    # which are not part of its life.
    after_end: bool = False


class FailRun(TransitionInput):
    script = "fail_run"

    error: RunFailure


class Cancel(TransitionInput):
    script = "cancel"

    reason: str | None = None
    # The abort set of the run's partition (its jobs' slot), from the key builders.
    abort_key: str = ""
    # A running run ends at its step's end instead (its model step or tool calls in
    # flight finish and are recorded; no new step starts); any other run ends now.
    at_step_end: bool = False

    @model_validator(mode="after")
    def _abort_key_of_run(self) -> Cancel:
        self.abort_key = self.abort_key or keys.abort_set(keys.partition_of(self.run_id))
        return self


class NodeCandidate(BaseModel):
    """A workflow node that may become ready: its job, and the nodes it waits for."""

    model_config = ConfigDict(extra="forbid")

    job: QueuedJob
    needs: list[str]


class WorkflowFinal(BaseModel):
    """The workflow call's result (the output's value, or a failed node's error)."""

    model_config = ConfigDict(extra="forbid")

    result: str  # ToolResultPart JSON
    events: list[str]
    next_job: QueuedJob
    # What its llm nodes used, added to the run's children's usage with the result.
    usage: Usage | None = None


class WorkflowRecord(TransitionInput):
    """One workflow node's outcome (NodeOutcome JSON), written once."""

    script = "workflow_record"

    step: int
    call_id: str
    node: str
    outcome: str
    events: list[str]
    candidates: list[NodeCandidate] = Field(default_factory=list)
    final: WorkflowFinal | None = None


class RedriveCall(BaseModel):
    """A call of the step that runs on a queue, and its job (as commit_step made it)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    job: QueuedJob


class Redrive(TransitionInput):
    """The sweeper found the run unmoved: the job its step waits for, enqueued again
    unless one is queued or held (orchestrator/runs/redrive.py)."""

    script = "redrive"

    step: int
    model_job: QueuedJob
    # Keys whose presence means the model step is in hand though its own job is gone:
    # its summary or resumed job (queued or held), its request parked with a provider batch.
    model_live: list[str] = Field(default_factory=list)
    calls: list[RedriveCall] = Field(default_factory=list)
    # The jobs the run itself owns that end a parked call's wait (its deadline; the job
    # that starts its child run, while there is none), and whether any parked call has
    # such a job at all (a wait on a human alone has none: nothing to watch).
    parked: list[RedriveCall] = Field(default_factory=list)
    watched: bool = False
    # How much later than a moving run a watched parked run is looked at again.
    recheck_ms: int = 0
    # An ended run: the jobs its end enqueued for whoever waits on it (its parent's
    # `child_ended`, its batch line's end) are enqueued again unless in hand (the parent
    # found its call, or the batch its line, still waiting on this ended run).
    ended: bool = False


INPUTS: tuple[type[TransitionInput], ...] = (
    CreateRun,
    StartQueued,
    BeginStep,
    HoldStep,
    CommitStep,
    ClaimCall,
    RecordResult,
    PostResult,
    ExpireParked,
    ResolveApproval,
    InputRequest,
    InputAnswer,
    Emit,
    FailRun,
    Cancel,
    WorkflowRecord,
    Redrive,
)
