"""Statuses, outcomes and stored field names of a run: the vocabulary of its state.

Every value here is also a Lua constant (see `lua_constants.py`): the transitions
and the Python readers cannot disagree on a spelling.
"""

from __future__ import annotations

from enum import StrEnum

from agentq.orchestrator.concurrency import slots
from agentq.orchestrator.core import fairness


class RunStatus(StrEnum):
    # a delayed run before its start time: its first model step waits as a timer
    SCHEDULED = "scheduled"
    # a run on a thread waiting for its turn (enqueue): its first model step is held
    # until the run before it ends (start_queued)
    QUEUED = "queued"
    RUNNING = "running"  # a model step or tool call is queued or executing
    AWAITING = "awaiting"  # at least one call waits on a human or an outside result
    SUCCEEDED = "succeeded"  # terminal: the model answered and nothing is left to run
    FAILED = "failed"  # terminal: a provider refused or a bug stopped the run
    CANCELLED = "cancelled"  # terminal: someone cancelled it


TERMINAL_STATUSES: frozenset[str] = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED}
)


class CallStatus(StrEnum):
    QUEUED = "queued"  # its job is on a tool queue
    RUNNING = "running"  # a worker claimed it
    AWAITING_APPROVAL = "awaiting-approval"  # parked until approved or denied
    AWAITING_RESULT = "awaiting-result"  # parked until a result is posted (client tool)
    DONE = "done"  # its result is recorded (write-once)


PARKED_CALL_STATUSES: frozenset[str] = frozenset(
    {CallStatus.AWAITING_APPROVAL, CallStatus.AWAITING_RESULT}
)


class StepAfter(StrEnum):
    """What the join does once every result of a step is in."""

    CONTINUE = "continue"  # schedule model step n+1
    FINISH = "finish"  # a stop condition holds: the run succeeds


class InputStatus(StrEnum):
    """The state of one input request (a forwarded MCP elicitation)."""

    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    EXPIRED = "expired"  # the asking call gave up waiting


class Outcome(StrEnum):
    """Every reply code a transition can give (the `outcome` of its reply)."""

    # create
    CREATED = "created"
    EXISTS = "exists"  # the same spec was submitted before: an idempotent no-op
    CONFLICT = "conflict"  # the id is taken by a run with a different spec
    OVER_LIMIT = "over-limit"  # the tenant is at a cap (core/tenant_limits.py): not created
    # guards shared by many transitions
    UNKNOWN_RUN = "unknown-run"
    UNKNOWN_CALL = "unknown-call"
    CLOSED = "closed"  # the run has ended
    STALE = "stale"  # the transition names a step that is not the run's current one
    DUPLICATE = "duplicate"  # already applied (a re-delivered job)
    WRONG_STATE = "wrong-state"  # the call (or input request) is not in the needed state
    # begin_step
    OK = "ok"
    # hold_step: a shared budget is reached; the step waits for it to be raised
    HELD = "held"
    # commit_step and the completions that feed the join
    COMMITTED = "committed"  # calls are out; the step waits for them
    RECORDED = "recorded"  # a result is in; others are still pending
    CONTINUED = "continued"  # the join scheduled the next model step
    FINISHED = "finished"  # the join (or a step with nothing to run) ended the run
    # claim_call
    CLAIMED = "claimed"
    DONE = "done"  # the call already has its result
    NOT_RUNNABLE = "not-runnable"  # parked calls are not run by a worker
    # resolve_approval
    APPROVED = "approved"
    # input requests
    PARKED = "parked"
    ANSWERED = "answered"
    # redrive
    REDRIVEN = "redriven"  # the step's lost jobs were enqueued again
    IN_HAND = "in-hand"  # every job the step waits for is queued or held
    # start_queued
    STARTED = "started"
    # emit, fail_run, cancel
    EMITTED = "emitted"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPING = "stopping"  # cancel at_step_end: the run ends when its step does


# Fields of the meta hash `aq:run:{id}`.
class MetaField(StrEnum):
    SPEC = "spec"
    SPEC_HASH = "spec_hash"
    STATUS = "status"
    STEP = "step"  # the current step index
    CREATED_AT = "created_at"
    FINISHED_AT = "finished_at"
    START_AT = "start_at"  # a delayed run's start time (seconds since the epoch)
    N_INITIAL = "n_initial"  # how many messages came with the spec
    TRACE = "trace"
    TOOL_ORDER = "tool_order"
    TEXT = "text"  # the final text, once succeeded
    OUTPUT = "output"  # the structured output as JSON, once succeeded with one
    ERROR = "error"  # a RunFailure as JSON, once failed
    USAGE_INPUT = "u_in"
    USAGE_OUTPUT = "u_out"
    USAGE_TOTAL = "u_total"
    USAGE_CACHED = "u_cached"
    USAGE_CACHE_WRITE = "u_cwrite"
    USAGE_REASONING = "u_reason"
    # The cost, USD by kind (CostBreakdown), and how many steps had no price (then the
    # cost is unknown: None).
    COST_INPUT = "c_in"
    COST_CACHED = "c_cached"
    COST_WRITE = "c_write"
    COST_OUTPUT = "c_out"
    COST_REASONING = "c_reason"
    UNPRICED = "unpriced"
    TOOL_CALLS = "tool_calls"  # how many tool calls its steps asked for (its budget's)
    TENANT = "tenant"  # whose run it is (DEFAULT_TENANT when none was named)
    # A child run (a sub-agent's): its parent's call as JSON {run_id, step, call_id}, the
    # job its end enqueues to hand the parent its result (a QueuedJob), and how deep it is.
    PARENT = "parent"
    PARENT_JOB = "parent_job"
    DEPTH = "depth"
    # What the run's children used, kept apart from its own usage.
    CHILD_USAGE_INPUT = "cu_in"
    CHILD_USAGE_OUTPUT = "cu_out"
    CHILD_USAGE_TOTAL = "cu_total"
    CHILD_USAGE_CACHED = "cu_cached"
    CHILD_USAGE_CACHE_WRITE = "cu_cwrite"
    CHILD_USAGE_REASONING = "cu_reason"
    CHILD_COST_INPUT = "cc_in"
    CHILD_COST_CACHED = "cc_cached"
    CHILD_COST_WRITE = "cc_write"
    CHILD_COST_OUTPUT = "cc_out"
    CHILD_COST_REASONING = "cc_reason"
    CHILD_UNPRICED = "c_unpriced"
    ORIGIN = "origin"  # a fork's {run_id, step} as JSON (orchestrator/runs/fork.py)
    # Steps answered through a provider batch API (batch-priced), and their tokens.
    BATCH_STEPS = "b_steps"
    BATCH_INPUT = "b_in"
    BATCH_OUTPUT = "b_out"
    # A cancel's reason, asked to take effect at the step's end (cancel at_step_end): the
    # join ends the run instead of starting the next step, and a step not begun never is.
    STOP_AT_STEP_END = "stop_at_step_end"
    # When (the caller's clock, a transition's `at`) a transition last scored the run in its
    # partition's moving index, or earlier: the index's score is no older (runs/lua/prelude.lua,
    # `moved`). Absent when something else wrote the entry (a delayed start, a hold, a sweep).
    MOVED_AT = "moved_at"
    # The last step committed with calls out (set with TOOL_CALLS; -1 before any): the step a
    # re-delivered begin_step finds committed without reading its hash. A step committed
    # with none is joined or ended at once (the run is past it). Absent: a run created
    # before it was kept (then the step's own hash says).
    COMMITTED = "committed"
    HELD_JOB = "held_job"  # a queued run's first model job (QueuedJob JSON) until it starts
    END_JOB = "end_job"  # a QueuedJob (JSON) the run's end enqueues: a batch's admission
    BATCH = "batch"  # a batch line's run: its batch's id (its steps count to its budget)
    # A run held at a step by a shared budget (orchestrator/budgets/): the budget's scope,
    # until its next commit or its end (not a thread's queued run: HELD_JOB).
    BUDGET_HELD = "budget_held"
    # Its lane (core/fairness.py): the enqueue and the claim read these by the job's run id.
    # The tenant a limited tenant's run is counted under (core/tenant_limits.py), whether
    # it is still counted as queued (until its first step begins), and in flight.
    LOAD_TENANT = "load_tenant"
    LOAD_QUEUED = "load_queued"
    LOAD_IN_FLIGHT = "load_in_flight"  # counted in flight there (not a batch's line)
    FAIR_TENANT = fairness.TENANT_FIELD
    FAIR_KEY = fairness.KEY_FIELD
    FAIR_WEIGHT = fairness.WEIGHT_FIELD
    FAIR_TENANT_WEIGHT = fairness.TENANT_WEIGHT_FIELD
    FAIR_RANK = fairness.RANK_FIELD
    # Its concurrency key (orchestrator/concurrency/): the claim reads the counter and max
    # by the job's run id; the counter goes when the run ends (its end jobs hold no slot).
    CONC_COUNTER = slots.COUNTER_FIELD
    CONC_MAX = slots.MAX_FIELD
    CONC_KEY = slots.KEY_FIELD


# The usage totals kept in the meta hash, by `Usage` field.
USAGE_FIELDS: dict[str, MetaField] = {
    "input_tokens": MetaField.USAGE_INPUT,
    "output_tokens": MetaField.USAGE_OUTPUT,
    "total_tokens": MetaField.USAGE_TOTAL,
    "cached_input_tokens": MetaField.USAGE_CACHED,
    "cache_write_tokens": MetaField.USAGE_CACHE_WRITE,
    "reasoning_tokens": MetaField.USAGE_REASONING,
}

# The children's usage (sub-agents), by `Usage` field.
CHILD_USAGE_FIELDS: dict[str, MetaField] = {
    "input_tokens": MetaField.CHILD_USAGE_INPUT,
    "output_tokens": MetaField.CHILD_USAGE_OUTPUT,
    "total_tokens": MetaField.CHILD_USAGE_TOTAL,
    "cached_input_tokens": MetaField.CHILD_USAGE_CACHED,
    "cache_write_tokens": MetaField.CHILD_USAGE_CACHE_WRITE,
    "reasoning_tokens": MetaField.CHILD_USAGE_REASONING,
}


# The cost totals (HINCRBYFLOAT), by `CostBreakdown` field; and the children's.
COST_FIELDS: dict[str, MetaField] = {
    "input_usd": MetaField.COST_INPUT,
    "cached_input_usd": MetaField.COST_CACHED,
    "cache_write_usd": MetaField.COST_WRITE,
    "output_usd": MetaField.COST_OUTPUT,
    "reasoning_usd": MetaField.COST_REASONING,
}
CHILD_COST_FIELDS: dict[str, MetaField] = {
    "input_usd": MetaField.CHILD_COST_INPUT,
    "cached_input_usd": MetaField.CHILD_COST_CACHED,
    "cache_write_usd": MetaField.CHILD_COST_WRITE,
    "output_usd": MetaField.CHILD_COST_OUTPUT,
    "reasoning_usd": MetaField.CHILD_COST_REASONING,
}


# Fields of a step hash `aq:run:{id}:s:<n>`. The prefixed ones are per call or request.
class StepField(StrEnum):
    RESP = "resp"  # the step record, written once: its presence means "committed"
    TEXT = "text"
    FINISH_REASON = "finish_reason"
    AFTER = "after"  # a StepAfter
    ORDER = "order"  # JSON list of the call ids the join puts in the tool message
    PENDING = "pending"  # calls without a result yet
    PARKED = "parked"  # calls (and input requests) waiting on the outside
    CALL = "c:"  # + call id: the CallPlan JSON
    CALL_STATUS = "st:"  # + call id: a CallStatus
    RESULT = "r:"  # + call id: the ToolResultPart JSON, written once
    INPUT = "in:"  # + request id: the input request JSON
    INPUT_STATUS = "ins:"  # + request id: an InputStatus
    BATCH = "batch"  # "1" when the step was answered through a provider batch API
    OUTPUT = "output"  # the run's structured output (JSON), when this step gave it


def call_field(prefix: StepField, call_id: str) -> str:
    return f"{prefix}{call_id}"
