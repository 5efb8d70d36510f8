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
HOOK_REPLY_INFIX = ":prep:"
SUMMARY_SUFFIX = ":summary"
WEBHOOKS_SUFFIX = ":webhooks"  # hash: webhook index -> the last event seq it settled
WEBHOOKS_LOCK_SUFFIX = ":webhooks:lock"  # the worker delivering the run's webhooks

REGISTRY = "aq:registry"  # hash: registry key -> ToolAnnouncement JSON
# hash: registry key -> ToolAnnouncement JSON, what the deployment serves (no expiry)
CATALOG = "aq:catalog"
RUN_ENDED = "aq:run-ended"  # pub/sub channel: the id of every run that ends
# sorted set: ids of runs with webhooks whose events are still to be delivered (score:
# when the run was added), for any worker's webhook dispatcher to take up
WEBHOOK_RUNS = "aq:webhook-runs"
QUEUE_PREFIX = "aq:queue:"
# A tool call without a run (`Client.call_tool`): `aq:call:{<id>}` and its event stream.
CALL_PREFIX = "aq:call:"
CALL_JOB_SUFFIX = ":job"
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
PREPARE_JOB_SUFFIX = ":prepare"
SUMMARY_JOB_SUFFIX = ":summary"
RESUMED_JOB_SUFFIX = ":resumed"


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


def hook_reply(run_id: str, step: int, request_id: str) -> str:
    """A list the overrides of a step's prepare_step hook, run elsewhere, are pushed to."""
    return f"{meta(run_id)}{HOOK_REPLY_INFIX}{step}:{request_id}"


def context_summary(run_id: str) -> str:
    """The run's stored context summary (context management's `summarize`)."""
    return meta(run_id) + SUMMARY_SUFFIX


LEASE_DEADLINE_PREFIX = "aq:lease-deadline:"


def lease_deadline(lease_id: str) -> str:
    """When the call a remote service leased must be done (unix ms), for its heartbeats."""
    return LEASE_DEADLINE_PREFIX + lease_id


def webhook_cursors(run_id: str) -> str:
    return meta(run_id) + WEBHOOKS_SUFFIX


def webhook_lock(run_id: str) -> str:
    return meta(run_id) + WEBHOOKS_LOCK_SUFFIX


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


def prepare_job_id(run_id: str, step: int, request_id: str) -> str:
    """One per request: a step run again asks again, even while the last job ends."""
    return f"{job_prefix(run_id)}{step}{PREPARE_JOB_SUFFIX}:{request_id}"


def summary_job_id(run_id: str, step: int) -> str:
    return f"{job_prefix(run_id)}{step}{SUMMARY_JOB_SUFFIX}"


def resumed_model_job_id(run_id: str, step: int) -> str:
    """A model step run again once its summary is stored (another id: the first job of
    the step may not have ended yet)."""
    return model_job_id(run_id, step) + RESUMED_JOB_SUFFIX


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


# -- tool calls without a run -------------------------------------------------------
# A call's id has a run id's alphabet; its keys and its job carry it as their hash tag.


def call_meta(call_id: str) -> str:
    return CALL_PREFIX + tag(call_id)


def call_events(call_id: str) -> str:
    return call_meta(call_id) + EVENTS_SUFFIX


def call_keys(call_id: str) -> list[str]:
    """The KEYS every call transition declares (see call_prelude.lua)."""
    return [call_meta(call_id), call_events(call_id)]


def call_answer(call_id: str, request_id: str) -> str:
    """A list the answer to a call's input request (elicitation) is pushed to."""
    return call_meta(call_id) + ANSWER_INFIX + request_id


def call_job_id(call_id: str) -> str:
    """The call's one job: a re-enqueue of the same call is a no-op."""
    return call_meta(call_id) + CALL_JOB_SUFFIX


# -- provider batch APIs (workers/provider_batch/) ----------------------------------
# A step parked for a provider batch keeps its request and, later, its answer beside the
# step's own keys (same run tag). A group of parked requests (one provider endpoint,
# model and key) keeps its queue, its in-flight provider batches and its collector's
# lease under the group's own hash tag, so each collector script touches one slot.
BATCH_STEP_SUFFIX = ":batch"
PROVIDER_BATCH_GROUPS = "aq:pbatch:groups"  # set of group ids with parked requests
PROVIDER_BATCH_PREFIX = "aq:pbatch:"


def batch_step(run_id: str, n: int) -> str:
    """Hash: the parked request of step n, its group, and the provider's answer once in."""
    return step(run_id, n) + BATCH_STEP_SUFFIX


def provider_batch_group(group_id: str) -> str:
    """Hash: the group's model reference (how a collector reaches its endpoint)."""
    return PROVIDER_BATCH_PREFIX + tag(group_id)


def provider_batch_pending(group_id: str) -> str:
    """Sorted set: parked members not yet in a provider batch, by the time they parked."""
    return provider_batch_group(group_id) + ":pending"


def provider_batch_known(group_id: str) -> str:
    """Set: every member parked and not yet answered (a re-parked member is a no-op)."""
    return provider_batch_group(group_id) + ":known"


def provider_batch_inflight(group_id: str) -> str:
    """Set: the ids of the group's batches that are submitted or being submitted."""
    return provider_batch_group(group_id) + ":inflight"


def provider_batch(group_id: str, batch_id: str) -> str:
    """Hash: one batch: its members in custom-id order, state, file and provider ids."""
    return provider_batch_group(group_id) + ":b:" + batch_id


def provider_batch_lease(group_id: str) -> str:
    """String: the collector worker that holds the group (expires unless renewed)."""
    return provider_batch_group(group_id) + ":lease"


def batch_member(run_id: str, n: int) -> str:
    """A parked step as a group member: `<step>:<run id>` (a run id has no ':')."""
    return f"{n}:{run_id}"


def parse_batch_member(member: str) -> tuple[str, int]:
    n, _, run_id = member.partition(":")
    return run_id, int(n)
