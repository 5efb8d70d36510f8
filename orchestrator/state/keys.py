"""Every Redis key and job id agentq writes, in one place (arq's `constants.py` idea).

A run's keys all carry its id as a Redis Cluster hash tag, `aq:run:{<id>}...`, so one
run's transition touches one slot; the id's alphabet (no `:`, `{`, `}`) keeps one run's
keys from ever naming another's. Job ids carry the same tag, so arq's job keys of a
run land in its slot too.
"""

from __future__ import annotations

import re

# A run id: what `RunSpec.id` accepts. No `:` (key separators) and no braces (hash tags).
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")

RUN_PREFIX = "aq:run:"
MESSAGES_SUFFIX = ":msgs"
EVENTS_SUFFIX = ":events"
TOOLS_SUFFIX = ":tools"
STEP_INFIX = ":s:"
ANSWER_INFIX = ":answer:"

REGISTRY = "aq:registry"  # hash: registry key -> ToolAnnouncement JSON
# hash: registry key -> ToolAnnouncement JSON, what the deployment serves (no expiry)
CATALOG = "aq:catalog"
RUN_ENDED = "aq:run-ended"  # pub/sub channel: the id of every run that ends
QUEUE_PREFIX = "aq:queue:"
WAKE_PREFIX = "aq:wake:"

# arq's key layout (arq.constants), which the Lua transitions write directly.
ARQ_JOB_PREFIX = "arq:job:"
ARQ_RESULT_PREFIX = "arq:result:"
ARQ_IN_PROGRESS_PREFIX = "arq:in-progress:"
ARQ_ABORT_SET = "arq:abort"

# Job ids: `aq:{<run>}:<step>:model`, `...:call:<call id>`, `...:expire:<call id>`.
JOB_PREFIX = "aq:"
JOB_SEPARATOR = ":"
MODEL_JOB_SUFFIX = ":model"
CALL_JOB_INFIX = ":call:"
EXPIRY_JOB_INFIX = ":expire:"


TAG_OPEN, TAG_CLOSE = "{", "}"


def tag(run_id: str) -> str:
    """The hash tag every key of the run carries."""
    return TAG_OPEN + run_id + TAG_CLOSE


def meta(run_id: str) -> str:
    return RUN_PREFIX + tag(run_id)


def messages(run_id: str) -> str:
    return meta(run_id) + MESSAGES_SUFFIX


def events(run_id: str) -> str:
    return meta(run_id) + EVENTS_SUFFIX


def tools(run_id: str) -> str:
    return meta(run_id) + TOOLS_SUFFIX


def step(run_id: str, n: int) -> str:
    return f"{meta(run_id)}{STEP_INFIX}{n}"


def answer(run_id: str, request_id: str) -> str:
    """A list the answer to an input request (elicitation) is pushed to."""
    return meta(run_id) + ANSWER_INFIX + request_id


def run_keys(run_id: str) -> list[str]:
    """The KEYS every run transition declares; the others derive from KEYS[1]."""
    return [meta(run_id), messages(run_id), events(run_id)]


def queue(name: str) -> str:
    return QUEUE_PREFIX + name


def wake(name: str) -> str:
    return WAKE_PREFIX + name


def job_prefix(run_id: str) -> str:
    return JOB_PREFIX + tag(run_id) + JOB_SEPARATOR


def model_job_id(run_id: str, step: int) -> str:
    return f"{job_prefix(run_id)}{step}{MODEL_JOB_SUFFIX}"


def tool_job_id(run_id: str, step: int, call_id: str) -> str:
    return f"{job_prefix(run_id)}{step}{CALL_JOB_INFIX}{call_id}"


def expiry_job_id(run_id: str, step: int, call_id: str) -> str:
    return f"{job_prefix(run_id)}{step}{EXPIRY_JOB_INFIX}{call_id}"


def arq_job(job_id: str) -> str:
    return ARQ_JOB_PREFIX + job_id


# -- batches --------------------------------------------------------------------------
# A tenant's batches share one hash tag, `{b.<tenant>}`, so that one admission (a Lua
# transition) can go round-robin across them; a batch's own keys derive from
# (tenant, batch id): `aq:batch:{b.<tenant>}:<id>` and its suffixes.
BATCH_PREFIX = "aq:batch:"
BATCH_TAG_PREFIX = "b."
BATCH_SCHED_SUFFIX = ":sched"  # hash: the tenant's in-flight count and cap
BATCH_RING_SUFFIX = ":ring"  # zset: the tenant's admitting batches, by round-robin pass
BATCH_INDEX_SUFFIX = ":index"  # zset: the tenant's batches, by creation time
BATCH_TOKEN_INFIX = ":tok:"  # string: what one admission job admitted (idempotency)
BATCH_IDS_SUFFIX = ":ids"  # hash: custom_id -> line number
BATCH_SPECS_SUFFIX = ":specs"  # hash: line number -> RunSpec JSON
BATCH_RECORDS_SUFFIX = ":recs"  # hash: line number -> compact line record JSON
BATCH_PENDING_SUFFIX = ":pending"  # list: line numbers waiting for admission
BATCH_RUNNING_SUFFIX = ":running"  # set: run ids of admitted lines still running
BATCH_END_JOB_SUFFIX = ":batch-end"
BATCH_KICK_INFIX = ":kick:"


def batch_base(tenant: str) -> str:
    """The prefix every batch key of the tenant starts with (carries the hash tag)."""
    return BATCH_PREFIX + tag(BATCH_TAG_PREFIX + tenant)


def batch_sched(tenant: str) -> str:
    return batch_base(tenant) + BATCH_SCHED_SUFFIX


def batch_ring(tenant: str) -> str:
    return batch_base(tenant) + BATCH_RING_SUFFIX


def batch_index(tenant: str) -> str:
    return batch_base(tenant) + BATCH_INDEX_SUFFIX


def batch_tenant_keys(tenant: str) -> list[str]:
    """The KEYS every batch transition declares; a batch's own keys derive from them."""
    return [batch_sched(tenant), batch_ring(tenant), batch_index(tenant)]


def batch_meta(tenant: str, batch_id: str) -> str:
    return f"{batch_base(tenant)}{JOB_SEPARATOR}{batch_id}"


def batch_ids(tenant: str, batch_id: str) -> str:
    return batch_meta(tenant, batch_id) + BATCH_IDS_SUFFIX


def batch_specs(tenant: str, batch_id: str) -> str:
    return batch_meta(tenant, batch_id) + BATCH_SPECS_SUFFIX


def batch_records(tenant: str, batch_id: str) -> str:
    return batch_meta(tenant, batch_id) + BATCH_RECORDS_SUFFIX


def batch_pending(tenant: str, batch_id: str) -> str:
    return batch_meta(tenant, batch_id) + BATCH_PENDING_SUFFIX


def batch_running(tenant: str, batch_id: str) -> str:
    return batch_meta(tenant, batch_id) + BATCH_RUNNING_SUFFIX


def batch_keys(tenant: str, batch_id: str) -> list[str]:
    """Every key one batch owns (what its retention expires)."""
    return [
        batch_meta(tenant, batch_id),
        batch_ids(tenant, batch_id),
        batch_specs(tenant, batch_id),
        batch_records(tenant, batch_id),
        batch_pending(tenant, batch_id),
        batch_running(tenant, batch_id),
    ]


def batch_run_prefix(tenant: str, batch_id: str) -> str:
    """What the run ids of a batch's lines start with (the tenant's name when it is not
    the default one, so that two tenants' batches of one id never share a run id)."""
    return (f"{tenant}." if tenant != "default" else "") + batch_id + "."


def batch_line_run_id(run_prefix: str, line: int, attempt: int) -> str:
    """The run of a line's attempt: derived, so admitting it twice creates one run."""
    return f"{run_prefix}{line}.{attempt}"


def batch_end_job_id(run_id: str) -> str:
    """The job the end of a batch's run enqueues (in the run's slot, once per run)."""
    return JOB_PREFIX + tag(run_id) + BATCH_END_JOB_SUFFIX


def batch_kick_job_id(tenant: str, batch_id: str, nonce: str) -> str:
    """A job that admits a batch's first lines (after its upload, or a retry)."""
    return f"{JOB_PREFIX}{tag(BATCH_TAG_PREFIX + tenant)}{BATCH_KICK_INFIX}{batch_id}:{nonce}"
