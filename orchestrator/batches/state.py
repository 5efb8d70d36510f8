"""The batch state, declared once: statuses, stored fields, one typed input and reply per
batch transition (`orchestrator/batches/lua/*.lua`, constants rendered from here).

A batch lives in its tenant's hash tag (see `keys.batch_base`): the tenant's scheduler
(its batch lines in flight, the batches waiting for room under its cap) and every batch
of the tenant share one slot, so one transition can record a line's end and admit the
next lines, the batch's own or, under the tenant's cap, a waiting batch's. Batches take
no turns otherwise: the claim interleaves their runs.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import BatchJobEnvelope
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.machine.transition import Transition

DEFAULT_BATCH_CONCURRENCY = 128
# A batch's priority is the weight of its fairness key (core/fairness.py): its lines take
# that many of its tenant's jobs a turn for one of a key of weight 1 (its direct runs').
MAX_BATCH_PRIORITY = 100
# How long an admission job's record (what it admitted) is kept for its re-delivery.
ADMISSION_TOKEN_TTL_S = 24 * 3600


class BatchStatus(StrEnum):
    UPLOADING = "uploading"  # lines are being stored; nothing is admitted yet
    RUNNING = "running"  # sealed: lines are admitted as runs end
    DONE = "done"  # terminal: every line ended
    CANCELLED = "cancelled"  # no new admissions; in-flight runs were cancelled
    # Never stored: how a running batch shows while its budget is reached (its runs'
    # next steps are held, orchestrator/budgets/); it runs again once the budget is raised.
    PAUSED = "paused"


class LineStatus(StrEnum):
    QUEUED = "queued"  # stored, waiting for admission
    RUNNING = "running"  # admitted: its run exists (or is being created)
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


LINE_END_STATUSES: frozenset[str] = frozenset(
    {LineStatus.SUCCEEDED, LineStatus.FAILED, LineStatus.CANCELLED}
)


class BatchOutcome(StrEnum):
    OPENED = "opened"
    RESUMED = "resumed"  # the batch exists and is still uploading
    SEALED = "sealed"
    EXISTS = "exists"  # already sealed: an idempotent re-submission
    STORED = "stored"
    SETTLED = "settled"
    DUPLICATE = "duplicate"  # the admission job ran before: its admissions again
    CANCELLED = "cancelled"
    REQUEUED = "requeued"
    UNKNOWN_BATCH = "unknown-batch"
    INCOMPLETE = "incomplete"  # sealing a batch that holds another number of lines
    CLOSED = "closed"
    REDRIVEN = "redriven"  # the sweeper enqueued a lost admission job again
    IN_HAND = "in-hand"  # the sweeper found nothing lost
    STALE = "stale"  # the line moved on since the sweeper read it


class BatchField(StrEnum):
    """Fields of a batch's meta hash `aq:batch:{b.<tenant>}:<id>`."""

    ID = "id"
    TENANT = "tenant"
    STATUS = "status"
    CONCURRENCY = "concurrency"
    PRIORITY = "priority"
    RUN_PREFIX = "run_prefix"  # what its lines' run ids start with
    METADATA = "metadata"  # JSON object
    RETENTION_S = "retention_s"
    LINES = "lines"  # lines stored
    LAST_LINE = "last_line"  # the highest line number stored (blank lines keep numbers)
    INFLIGHT = "inflight"  # admitted, not ended
    CREATED_AT = "created_at"
    SEALED_AT = "sealed_at"
    FINISHED_AT = "finished_at"
    LAST_END_AT = "last_end_at"
    KICK = "kick"  # the last kick job (a QueuedJob, JSON): the sweeper's to find in hand
    # Admission latency: a run's end to the next line's admission, summed and maximum.
    ADMIT_LATENCY_SUM = "admit_lat_sum"
    ADMIT_LATENCY_N = "admit_lat_n"
    ADMIT_LATENCY_MAX = "admit_lat_max"
    USAGE_INPUT = "u_in"
    USAGE_OUTPUT = "u_out"
    USAGE_TOTAL = "u_total"
    COST = "cost"  # USD, the ended lines' (their sub-agents' included)
    UNPRICED = "unpriced"  # ended lines whose cost is unknown (a model without a price)


class SchedField(StrEnum):
    """Fields of a tenant's scheduler hash."""

    INFLIGHT = keys.BATCH_SCHED_IN_FLIGHT
    # The last place given in the order of the batches waiting for room under the cap.
    WAIT_SEQ = "wait_seq"


class RecordField(StrEnum):
    """Keys of a compact line record (JSON in the records hash): kept for the batch's
    retention, so results stay collectable after the runs' own keys expire."""

    CUSTOM_ID = "c"
    STATUS = "s"
    RUN_ID = "r"
    ATTEMPT = "a"
    TEXT = "t"
    USAGE = "u"
    ERROR = "e"
    # The run's structured output as JSON text: a string, because the record passes
    # through cjson, which would read an empty array back as an object.
    OUTPUT = "o"
    # While the line runs: the envelope of the admission job that admitted it, which
    # creates its run (enqueued again by the sweeper if lost before that).
    ADMITTED_BY = "b"
    # What its runs' ids start with: its concurrency key's placement (runs/creation.py:
    # derived_placement), set at upload; absent for a line without a key.
    PLACEMENT = "p"


def _lua_list(value: Any) -> Any:
    """cjson encodes an empty Lua table as `{}`: read it as the empty list it was."""
    return [] if value == {} else value


# The batch scripts' Lua constants, rendered after the run chunk (batches/store.py).
BATCH_TABLES: dict[str, type[StrEnum]] = {
    "BATCH": BatchStatus,
    "LINE": LineStatus,
    "BOUT": BatchOutcome,
    "BF": BatchField,
    "SF": SchedField,
    "RF": RecordField,
}
BATCH_KEY_CONSTANTS: dict[str, str] = {
    "PREFIX": keys.BATCH_PREFIX,
    "SEP": keys.JOB_SEPARATOR,
    "SCHED": keys.BATCH_SCHED_SUFFIX,
    "TOKEN": keys.BATCH_TOKEN_INFIX,
    "IDS": keys.BATCH_IDS_SUFFIX,
    "SPECS": keys.BATCH_SPECS_SUFFIX,
    "RECORDS": keys.BATCH_RECORDS_SUFFIX,
    "PENDING": keys.BATCH_PENDING_SUFFIX,
    "RUNNING": keys.BATCH_RUNNING_SUFFIX,
}


class BatchInput(Transition):
    """What every batch transition reads: which batch."""

    batch_id: str


class BatchOpen(BatchInput):
    script = "batch_open"

    tenant: str
    run_prefix: str
    concurrency: int
    priority: int
    metadata: str  # JSON object
    retention_s: int
    upload_ttl_s: int = 24 * 3600  # an upload never sealed expires this long after it began


class UploadLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    line: int
    custom_id: str
    spec: str  # RunSpec JSON
    placement: str  # its runs' id prefix: its concurrency key's placement, or ""


class BatchUpload(BatchInput):
    script = "batch_upload"

    lines: list[UploadLine]
    upload_ttl_s: int = 24 * 3600  # each chunk pushes an unsealed batch's expiry back


class BatchSeal(BatchInput):
    script = "batch_seal"

    lines: int  # how many lines the submitter read: the batch must hold them all
    kick: QueuedJob


class BatchSettle(BatchInput):
    """An admission job: record a line's end (when it carries one), then admit the
    batch's lines up to its concurrency; under its tenant's cap, a place freed goes to
    the batches waiting for one first."""

    script = "batch_settle"

    token: str  # the admission job's id: a re-delivery gets the same admissions
    by: BatchJobEnvelope | None = None  # that job (none: a sweeper's own settle)
    token_ttl_s: int = ADMISSION_TOKEN_TTL_S
    line: int | None = None
    run_id: str | None = None
    record: dict[str, Any] | None = None  # the ended line's compact record
    ended_at: float | None = None
    # The tenant's max_in_flight (AGENTQ_TENANT_LIMITS, 0: none): its batches' lines in
    # flight, with its other runs in flight (`others_in_flight`, read just before), stay
    # under it, the rest wait (the store sets both).
    tenant_cap: int = 0
    others_in_flight: int = 0


class BatchCancel(BatchInput):
    script = "batch_cancel"


class BatchRetry(BatchInput):
    """Requeue the lines in [first, last] whose status is in `statuses`."""

    script = "batch_retry"

    first: int
    last: int
    statuses: list[LineStatus]
    kick: QueuedJob | None = None


class BatchRedrive(BatchInput):
    """The sweeper found an entry of the moving index unmoved (batches/redrive.py): a
    batch with lines to admit (no `line`), or an admitted line and the run it read."""

    script = "batch_redrive"

    entry: str  # the entry as the index holds it
    tenant_cap: int = 0  # as BatchSettle's: a batch at it has no room for a kick
    others_in_flight: int = 0  # as BatchSettle's
    line: int | None = None
    run_id: str | None = None
    # A batch: a new kick, enqueued if the batch could admit and nothing admits it. A
    # line: the kick that admitted it, enqueued again unless in hand.
    job: QueuedJob | None = None


BATCH_INPUTS: tuple[type[BatchInput], ...] = (
    BatchOpen,
    BatchUpload,
    BatchSeal,
    BatchSettle,
    BatchCancel,
    BatchRetry,
    BatchRedrive,
)


class BatchReply(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: BatchOutcome
    status: str | None = None
    lines: int = 0


class DuplicateLine(BaseModel):
    line: int
    first: int  # the line that has the custom_id already
    custom_id: str


class UploadReply(BatchReply):
    stored: int = 0
    duplicates: Annotated[list[DuplicateLine], BeforeValidator(_lua_list)] = []


class Admission(BaseModel):
    """A line the settle admitted: its batch, line number, run id and spec, and its
    batch's priority (the weight of the batch's fairness key, core/fairness.py)."""

    batch_id: str
    line: int
    run_id: str
    spec: str = ""
    priority: int = 1


class SettleReply(BatchReply):
    admitted: Annotated[list[Admission], BeforeValidator(_lua_list)] = []


class CancelBatchReply(BatchReply):
    running: Annotated[list[str], BeforeValidator(_lua_list)] = []


class RetryReply(BatchReply):
    requeued: int = 0


class RedriveBatchReply(BatchReply):
    jobs: int = 0
