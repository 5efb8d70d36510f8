"""Every Redis key and job id agentq writes, in one place (arq's `constants.py` idea).

Partitions. A deployment has a fixed number of partitions (`AGENTQ_PARTITIONS`); each
has its own Redis Cluster hash tag, and a run (a call without a run, a tenant's
batches) belongs to the partition its id hashes to. Every key of the run, its job ids
(so arq's job, in-progress and retry keys) and the queues and wake-up lists its jobs go
to carry that tag, so each transition touches one slot. Queues are per partition:
`aq:queue:{<tag>}:model`; workers serve every partition.

With one partition (the default on a single Redis) a run's tag is its own id,
`aq:run:{<id>}`, and the queues have no tag (`aq:queue:model`): the layout of a single
Redis is unchanged. With N partitions it is `aq:run:{<tag>}:<id>`. Either way a run's
keys are `RUN_PREFIX + name(id)...` and its job ids `JOB_PREFIX + name(id) + ':'...`,
which is how the Lua side derives job ids from KEYS[1]. The id's alphabet (no `:`,
`{`, `}`) keeps one run's keys from ever naming another's.
"""

from __future__ import annotations

import functools
import itertools
import re
import string

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from agentq.orchestrator.core.run_ids import PLACED_RUN_ID, tenant_run_id

# A run id: what `RunSpec.id` accepts. No `:` (key separators) and no braces (hash tags).
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")

RUN_PREFIX = "aq:run:"
MESSAGES_SUFFIX = ":msgs"
EVENTS_SUFFIX = ":events"
TOOLS_SUFFIX = ":tools"
# stream: made by a run's waiters (empty), its end writes its status there for them to
# block on (runs/lua/prelude.lua: `ended_key`)
ENDED_SUFFIX = ":ended"
STEP_INFIX = ":s:"
ANSWER_INFIX = ":answer:"
WORKFLOW_INFIX = ":wf:"
WORKFLOW_SEPARATOR = ":"  # between the step and the call id of a workflow's hash
HOOK_REPLY_INFIX = ":hook:"
HOOK_REQUEST_SUFFIX = ":ask"
SUMMARY_SUFFIX = ":summary"
TIMERS_SUFFIX = ":timers"  # hash: the run's timer job ids -> the timer set each is in
WEBHOOKS_SUFFIX = ":webhooks"  # hash: webhook index -> the last event seq it settled
WEBHOOKS_LOCK_SUFFIX = ":webhooks:lock"  # the worker delivering the run's webhooks

REGISTRY = "aq:registry"  # hash: registry key -> ToolAnnouncement JSON
# hash: registry key -> ToolAnnouncement JSON, what the deployment serves (no expiry)
CATALOG = "aq:catalog"
# hash: the published workflows, `<name>` -> its latest version, `<name>@<version>` -> that
# version's definition JSON (every version kept, so a spec may still pin one)
WORKFLOWS = "aq:workflows"
# pub/sub channel: the id of every run that ends, for the processes whose executors keep
# something for runs between calls (sandbox sessions)
RUN_ENDED = "aq:run-ended"
# pub/sub channels `aq:run-ended:<worker id>`: the id of a run that ended while the worker
# process held one of its jobs (told by the run's end, which reads its jobs' holders)
RUN_ENDED_TO = RUN_ENDED + ":"
# string: the worker process whose turn it is to do the fleet's upkeep (the reaper's passes)
UPKEEP_TURN = "aq:upkeep:turn"
# sorted set: ids of runs with webhooks whose events are still to be delivered (score:
# when the run was added), for any worker's webhook dispatcher to take up
WEBHOOK_RUNS = "aq:webhook-runs"
QUEUE_PREFIX = "aq:queue:"
# A tool call without a run (`client.calls.call`): `aq:call:{<id>}` and its event stream.
CALL_PREFIX = "aq:call:"
CALL_JOB_SUFFIX = ":job"
WAKE_PREFIX = "aq:wake:"
# Zset per partition: the live runs, scored by when each last moved (ms, Redis's clock),
# written by the run transitions (runs/lua/prelude.lua: moved) and read by the sweeper
# that re-drives a run whose step lost its job (orchestrator/runs/redrive.py); likewise
# for tool calls without a run (calls/lua/call_prelude.lua, orchestrator/calls/redrive.py).
MOVING_PREFIX = "aq:moving:"
MOVING_RUNS = "runs"
MOVING_CALLS = "calls"
MOVING_BATCHES = "batches"
# Hash per partition: each limited tenant's runs in flight (`i:<tenant>`) and queued
# (`q:<tenant>`) in the partition, kept by the run transitions (core/tenant_limits.py).
TENANTS_PREFIX = "aq:tenants:"
TENANT_LOAD = "load"
TENANT_IN_FLIGHT = "i:"
TENANT_QUEUED = "q:"
# A queue's timers (jobs due later: a parked call's deadline), apart from its ready jobs.
TIMERS_PREFIX = "aq:timers:"
# A queue's lanes (core/fairness.py), per partition: the ring of tenants with ready work
# (a list), each tenant's ring of its keys with ready work (a list), and each lane's
# (tenant and key's) ready jobs (a sorted set by rank).
FAIR_PREFIX = "aq:fair:"
FAIR_RING_SUFFIX = ":ring"
FAIR_KEYS_INFIX = ":keys:"
FAIR_LANE_INFIX = ":lane:"
# A concurrency key's state (orchestrator/concurrency/), in the partition its runs are
# placed in: a hash of the runs holding a running job (run id -> its jobs running), and
# the key's jobs held back while it is at its max (a sorted set of [queue, job] by due).
CONCURRENCY_PREFIX = "aq:conc:"
CONCURRENCY_WAIT_SUFFIX = ":wait"
# Hash per partition: its active keys (counter -> max), for a tenant's list of its keys; no
# key's name is it (a key's is `<tenant>/<key>`).
CONCURRENCY_ACTIVE = "@active"
# A queue's jobs held back by their concurrency key, per partition (a sorted set by due):
# still in the queue, they are not work its pool can run (fleet/queues.py counts them apart).
HELD_PREFIX = "aq:held:"

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
# A parked call some job starts (a sub-agent's child run, a workflow's first nodes).
START_JOB_INFIX = ":start:"
# A child run's end hands its parent's call the result (tagged with the child's id).
PARENT_JOB_SUFFIX = "parent"
# One node of a workflow call: `...:node:<call id>:<node id>`.
NODE_JOB_INFIX = ":node:"
HOOK_JOB_SUFFIX = ":hook"
SUMMARY_JOB_SUFFIX = ":summary"
RESUMED_JOB_SUFFIX = ":resumed"


TAG_OPEN, TAG_CLOSE = "{", "}"

# -- partitions -------------------------------------------------------------------------
# How many partitions a single Redis and a cluster get unless AGENTQ_PARTITIONS says.
SINGLE_NODE_PARTITIONS = 1
CLUSTER_PARTITIONS = 16
MAX_PARTITIONS = 1024

_partitions = SINGLE_NODE_PARTITIONS


# string: the deployment's partition count, recorded by its first worker
PARTITIONS = "aq:partitions"
# Written before a WAIT that follows one that fell short (redis/acks.py): a WAIT counts
# only the writes of its own connection, so a retried transition that writes nothing
# would otherwise be "acknowledged" without the write that fell short.
REPLICA_ACK_PROBE = "aq:replica-ack-probe"


def run_ended_to(worker_id: str) -> str:
    """The channel a worker process hears the ends of the runs whose jobs it holds on."""
    return RUN_ENDED_TO + worker_id


def use_partitions(count: int) -> None:
    """Set the deployment's partition count for this process (`redis_conn.connect` does,
    from the settings): every process of a deployment must use the same."""
    global _partitions
    if not 1 <= count <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be 1..{MAX_PARTITIONS}, not {count}")
    _partitions = count


def partition_count() -> int:
    return _partitions


def partitions() -> range:
    return range(_partitions)


@functools.cache
def partition_tags(count: int) -> tuple[str, ...]:
    """Tag i is the first short name whose slot falls in the i-th of `count` equal slot
    ranges: the partitions spread evenly over slots, so over a cluster's primaries."""
    width = REDIS_CLUSTER_HASH_SLOTS / count
    tags: list[str | None] = [None] * count
    missing = count
    alphabet = string.ascii_lowercase + string.digits
    for length in itertools.count(1):
        for letters in itertools.product(alphabet, repeat=length):
            name = "".join(letters)
            i = int(key_slot(name.encode()) / width)
            if tags[i] is None:
                tags[i] = name
                missing -= 1
                if missing == 0:
                    return tuple(t for t in tags if t is not None)
    raise AssertionError("unreachable")


@functools.cache
def _tag_index(count: int) -> dict[str, int]:
    return {t: i for i, t in enumerate(partition_tags(count))}


def partition_of(owner: str) -> int:
    """The partition of a run, a call or a batch tenant: a stable hash of its id (of a
    placed run's id, its placement prefix: core/run_ids.py PLACED_RUN_ID)."""
    if _partitions == 1:
        return 0
    placed = PLACED_RUN_ID.match(owner)
    hashed = owner if placed is None else placed.group(0)
    return key_slot(hashed.encode()) * _partitions // REDIS_CLUSTER_HASH_SLOTS


def partition_tag(partition: int) -> str:
    return TAG_OPEN + partition_tags(_partitions)[partition] + TAG_CLOSE


def tag(owner: str) -> str:
    """What every key of `owner` (a run, a call, a batch tenant) starts its name with:
    its partition's hash tag and its id (its id as the tag, with one partition)."""
    if _partitions == 1:
        return TAG_OPEN + owner + TAG_CLOSE
    return partition_tag(partition_of(owner)) + JOB_SEPARATOR + owner


def job_partition(job_id: str) -> int:
    """The partition a job (any id these builders made) belongs to, from its tag."""
    if _partitions == 1:
        return 0
    start = job_id.index(TAG_OPEN) + 1
    return _tag_index(_partitions)[job_id[start : job_id.index(TAG_CLOSE, start)]]


def _partitioned(prefix: str, partition: int, name: str) -> str:
    if _partitions == 1:
        return prefix + name
    return prefix + partition_tag(partition) + JOB_SEPARATOR + name


def concurrency(run_id: str, name: str) -> str:
    """The counter of concurrency key `name` (`<tenant>/<key>`), in `run_id`'s partition
    (a placed run's: the key's)."""
    return _partitioned(CONCURRENCY_PREFIX, partition_of(run_id), name)


def concurrency_active(partition: int) -> str:
    """The active concurrency keys of a partition (their counters, each with its max)."""
    return _partitioned(CONCURRENCY_PREFIX, partition, CONCURRENCY_ACTIVE)


def meta(run_id: str) -> str:
    return RUN_PREFIX + tag(run_id)


def messages(run_id: str) -> str:
    return meta(run_id) + MESSAGES_SUFFIX


def events(run_id: str) -> str:
    return meta(run_id) + EVENTS_SUFFIX


def tools(run_id: str) -> str:
    return meta(run_id) + TOOLS_SUFFIX


def ended(run_id: str) -> str:
    return meta(run_id) + ENDED_SUFFIX


def step(run_id: str, n: int) -> str:
    return f"{meta(run_id)}{STEP_INFIX}{n}"


def answer(run_id: str, request_id: str) -> str:
    """A list the answer to an input request (elicitation) is pushed to."""
    return meta(run_id) + ANSWER_INFIX + request_id


def workflow(run_id: str, step: int, call_id: str) -> str:
    """A hash of a workflow call's node results (node id -> result JSON, written once)."""
    return f"{meta(run_id)}{WORKFLOW_INFIX}{step}{WORKFLOW_SEPARATOR}{call_id}"


def hook_reply(run_id: str, step: int, request_id: str) -> str:
    """A list the answer of a step's hook, run elsewhere (a `hook` job), is pushed to."""
    return f"{meta(run_id)}{HOOK_REPLY_INFIX}{step}:{request_id}"


def hook_request(run_id: str, step: int, request_id: str) -> str:
    """What a `hook` job asks its hook (kind, name, arguments), written by the step."""
    return hook_reply(run_id, step, request_id) + HOOK_REQUEST_SUFFIX


def context_summary(run_id: str) -> str:
    """The run's stored context summary (context management's `summarize`)."""
    return meta(run_id) + SUMMARY_SUFFIX


RATE_LIMIT_PREFIX = "agentq:ratelimit:"


def rate_limit(provider: str, model: str, key_hash: str) -> str:
    """What a quota's keys (`:log`, `:spent`, `:backoff`...) start with: one hash tag for
    all of them, so the limiter's scripts touch one slot."""
    return f"{RATE_LIMIT_PREFIX}{TAG_OPEN}{provider}:{model}:{key_hash}{TAG_CLOSE}"


def shared_secret(name: str) -> str:
    """A deployment-wide secret (Client.shared_secret); one key, no run's partition."""
    return f"aq:secret:{name}"


def credential(issuer: str, credential_id: str) -> str:
    """A live credential a door issued (`agentq serve`'s tokens), under the key that
    issued it: kept until it expires, deleted to revoke it (Client.credentials)."""
    return f"aq:token:{issuer}:{credential_id}"


LEASE_DEADLINE_PREFIX = "aq:lease-deadline:"


def lease_deadline(lease_id: str) -> str:
    """When the call a remote service leased must be done (unix ms), for its heartbeats."""
    return LEASE_DEADLINE_PREFIX + lease_id


LEASE_DONE_PREFIX = "aq:lease-done:"


def lease_done(lease_id: str) -> str:
    """How a lease ended ("answered", "timed-out", or "lapsed", written as it starts)
    and its holder, kept a while so that a late or repeated request of its holder hears
    the truth."""
    return LEASE_DONE_PREFIX + lease_id


TREE_PREFIX = "aq:tree:"


def tree(trace_id: int) -> str:
    """The set of child runs one run tree started (a tree is named by its top run's trace
    id, which every run of it carries: core/run_ids.py)."""
    return f"{TREE_PREFIX}{trace_id:032x}"


def tree_steps(trace_id: int) -> str:
    """The set of model steps (`<run id>:<step>`) the runs of one run tree began."""
    return f"{tree(trace_id)}:steps"


# A thread (a conversation whose runs continue one another): its hash and its runs list
# share the thread's tag (one slot); a thread id is in its tenant's namespace
# (`tenant_run_id`), as a chosen run id is. Each tenant's threads are listed apart.
THREAD_PREFIX = "aq:thread:"
THREAD_RUNS_SUFFIX = ":runs"
THREAD_QUEUED_SUFFIX = ":queued"  # list: runs waiting for the turn (their requests' JSON)
THREAD_END_JOB_SUFFIX = ":thread-end"
THREAD_INDEX_PREFIX = "aq:threads:"


def thread(thread_id: str) -> str:
    return THREAD_PREFIX + tag(thread_id)


def thread_runs(thread_id: str) -> str:
    return thread(thread_id) + THREAD_RUNS_SUFFIX


def thread_queued(thread_id: str) -> str:
    return thread(thread_id) + THREAD_QUEUED_SUFFIX


def thread_end_job_id(run_id: str) -> str:
    """The job the end of a thread's run enqueues (in the run's slot, once per run)."""
    return JOB_PREFIX + tag(run_id) + THREAD_END_JOB_SUFFIX


def thread_index(tenant: str) -> str:
    return THREAD_INDEX_PREFIX + tenant


def webhook_cursors(run_id: str) -> str:
    return meta(run_id) + WEBHOOKS_SUFFIX


def webhook_lock(run_id: str) -> str:
    return meta(run_id) + WEBHOOKS_LOCK_SUFFIX


def run_keys(run_id: str) -> list[str]:
    """The KEYS every run transition declares; the others derive from KEYS[1]."""
    return [meta(run_id), messages(run_id), events(run_id)]


def queue(name: str, partition: int = 0) -> str:
    """A queue's sorted set in one partition (`aq:queue:model` with one partition)."""
    return _partitioned(QUEUE_PREFIX, partition, name)


def wake(name: str, partition: int = 0) -> str:
    """A queue's wake-up list in one partition."""
    return _partitioned(WAKE_PREFIX, partition, name)


def timers(name: str, partition: int = 0) -> str:
    """A queue's timers in one partition: a sorted set of job ids by when each falls
    due, moved into the queue by the claim (workers/queue/lua/take.lua) when due."""
    return _partitioned(TIMERS_PREFIX, partition, name)


def held(name: str, partition: int = 0) -> str:
    """A queue's jobs held for their concurrency key in one partition, which the claim
    keeps beside each key's own held jobs (machine/lua/conc.lua)."""
    return _partitioned(HELD_PREFIX, partition, name)


def fair(name: str, partition: int = 0) -> str:
    """What a queue's lane keys start with, in one partition (`aq:fair:model` with one):
    the claim and the enqueue derive them from the queue's key (machine/lua/fair.lua)."""
    return _partitioned(FAIR_PREFIX, partition, name)


def fair_keys(name: str, tenant: str, partition: int = 0) -> str:
    """The ring of one tenant's keys with ready jobs in a queue, in one partition."""
    return fair(name, partition) + FAIR_KEYS_INFIX + tenant


def fair_lane(name: str, tenant: str, key: str, partition: int = 0) -> str:
    """The sorted set of one lane's (a tenant's key's) ready jobs of a queue, in one
    partition (a key holds no '/', so the name after the last is the key)."""
    return f"{fair(name, partition)}{FAIR_LANE_INFIX}{tenant}/{key}"


def run_timers(run_id: str) -> str:
    """The run's timers, so that its end removes them (prelude.lua: finish_run)."""
    return meta(run_id) + TIMERS_SUFFIX


def queue_name(queue_key: str) -> str:
    """The queue a partition's queue key (or wake-up list) belongs to."""
    return (
        queue_key.rpartition(TAG_CLOSE + JOB_SEPARATOR)[2]
        .removeprefix(QUEUE_PREFIX)
        .removeprefix(WAKE_PREFIX)
    )


def job_queue(name: str, job_id: str) -> str:
    """The queue a job goes to: `name`'s, in the partition of the job's tag."""
    return queue(name, job_partition(job_id))


def job_wake(name: str, job_id: str) -> str:
    return wake(name, job_partition(job_id))


def job_timers(name: str, job_id: str) -> str:
    return timers(name, job_partition(job_id))


WORKER_PREFIX = "aq:worker:"
WORKER_JOBS_SUFFIX = ":jobs"
WORKER_PASSED_SUFFIX = ":passed:"
LEASE_HOLDERS = "aq:lease:holders"


def moving_runs(partition: int = 0) -> str:
    """Zset: a partition's live runs by when each last moved (`aq:moving:runs` with one
    partition; in the partition's slot otherwise, so a run transition writes it)."""
    return _partitioned(MOVING_PREFIX, partition, MOVING_RUNS)


def tenant_load(partition: int = 0) -> str:
    """Hash: a partition's counts of its limited tenants' runs (core/tenant_limits.py), in
    the partition's slot, so a run's create and end transitions write it."""
    return _partitioned(TENANTS_PREFIX, partition, TENANT_LOAD)


def moving_calls(partition: int = 0) -> str:
    """Zset: a partition's tool calls without a run that are not done, by when each last
    moved (the call transitions write it, the sweeper reads it)."""
    return _partitioned(MOVING_PREFIX, partition, MOVING_CALLS)


USAGE_PREFIX = "aq:usage:"
USAGE_TENANTS = "tenants"


def tenant_usage(partition: int = 0) -> str:
    """Hash: a partition's usage totals by tenant, `<tenant>:<Usage field>` (tokens) and
    `<tenant>:<CostBreakdown field>` / `<tenant>:unpriced` (cost), written by
    `commit_step` in the run's slot; a tenant's total sums the partitions."""
    return _partitioned(USAGE_PREFIX, partition, USAGE_TENANTS)


USAGE_BATCHES = "batches"


def tenant_window_usage(window: str, partition: int = 0) -> str:
    """Hash: a partition's usage totals by tenant within one window of time (`2026-11-26`,
    `2026-11`), named as `tenant_usage` names them, for tenants whose budget has a period
    (orchestrator/budgets/); written by `commit_step`, expiring after the window."""
    return _partitioned(USAGE_PREFIX, partition, f"{USAGE_TENANTS}{JOB_SEPARATOR}{window}")


def batch_usage(tenant: str, batch_id: str, partition: int = 0) -> str:
    """Hash: a batch's usage totals in one partition, by `Usage` / `CostBreakdown` field as
    `tenant_usage` names them after its prefix, written by `commit_step` in the run's slot
    as each step of the batch's runs is recorded (what the batch's budget is judged on,
    orchestrator/budgets/); kept for the retention after the batch's last step."""
    name = f"{USAGE_BATCHES}{JOB_SEPARATOR}{tenant}{JOB_SEPARATOR}{batch_id}"
    return _partitioned(USAGE_PREFIX, partition, name)


BUDGETS_PREFIX = "aq:budgets:"
BUDGETS_HELD = "held"
BUDGETS_TENANTS = "aq:budgets:tenants"


def budgets_held(partition: int = 0) -> str:
    """Hash: a partition's runs held at a step by a shared budget, run id -> the budget's
    scope (orchestrator/budgets/); written by `hold_step`, cleared by the run's next
    commit or its end, read when a budget is raised to send the held steps on."""
    return _partitioned(BUDGETS_PREFIX, partition, BUDGETS_HELD)


def tenant_budgets() -> str:
    """Hash: the operator's tenant budgets, tenant -> a SharedBudget as JSON, over the
    deployment's AGENTQ_TENANT_BUDGETS entry (`agentq budget tenant`)."""
    return BUDGETS_TENANTS


def moving_batches(partition: int = 0) -> str:
    """Zset: a partition's batches with lines to admit and its admitted lines not ended,
    by when each last moved (the batch transitions write it in their tenant's slot)."""
    return _partitioned(MOVING_PREFIX, partition, MOVING_BATCHES)


def worker_jobs(worker_id: str, partition: int = 0) -> str:
    """Hash: the jobs a worker (or a remote lease) holds in one partition."""
    return _partitioned(WORKER_PREFIX, partition, worker_id) + WORKER_JOBS_SUFFIX


def worker_passed(worker_id: str, queue: str, partition: int = 0) -> str:
    """Set: the ready jobs of a queue a worker's last claim passed over for want of a
    tool, in one partition (the claim wakes another worker only for jobs not in it)."""
    return _partitioned(WORKER_PREFIX, partition, worker_id) + WORKER_PASSED_SUFFIX + queue


def lease_holders(partition: int = 0) -> str:
    """Set: the ids of the workers that may hold jobs in one partition."""
    if _partitions == 1:
        return LEASE_HOLDERS
    return LEASE_HOLDERS + JOB_SEPARATOR + partition_tag(partition)


TOOL_SET_PREFIX = "aq:toolset:"


def tool_set(digest: str, partition: int = 0) -> str:
    """Set: the registry keys one tool set serves (named by their digest, so the workers
    of one set share it), in one partition, for the claim to check a job's `needs`."""
    return _partitioned(TOOL_SET_PREFIX, partition, digest)


def abort_set(partition: int) -> str:
    """A partition's sorted set of job ids to abort (arq's `arq:abort` with one)."""
    if _partitions == 1:
        return ARQ_ABORT_SET
    return ARQ_ABORT_SET + JOB_SEPARATOR + partition_tag(partition)


def abort_set_of(job_id: str) -> str:
    return abort_set(job_partition(job_id))


def job_prefix(run_id: str) -> str:
    return JOB_PREFIX + tag(run_id) + JOB_SEPARATOR


def model_job_id(run_id: str, step: int) -> str:
    return f"{job_prefix(run_id)}{step}{MODEL_JOB_SUFFIX}"


def tool_job_id(run_id: str, step: int, call_id: str) -> str:
    return f"{job_prefix(run_id)}{step}{CALL_JOB_INFIX}{call_id}"


def expiry_job_id(run_id: str, step: int, call_id: str) -> str:
    return f"{job_prefix(run_id)}{step}{EXPIRY_JOB_INFIX}{call_id}"


def start_job_id(run_id: str, step: int, call_id: str) -> str:
    return f"{job_prefix(run_id)}{step}{START_JOB_INFIX}{call_id}"


def parent_job_id(child_run_id: str) -> str:
    return job_prefix(child_run_id) + PARENT_JOB_SUFFIX


def node_job_id(run_id: str, step: int, call_id: str, node: str) -> str:
    return f"{job_prefix(run_id)}{step}{NODE_JOB_INFIX}{call_id}{JOB_SEPARATOR}{node}"


def hook_job_id(run_id: str, step: int, request_id: str) -> str:
    """One per request: a step run again asks again, even while the last job ends."""
    return f"{job_prefix(run_id)}{step}{HOOK_JOB_SUFFIX}:{request_id}"


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
# transition) can hand a place under the tenant's cap to another of its batches; a
# batch's own keys derive from
# (tenant, batch id): `aq:batch:{b.<tenant>}:<id>` and its suffixes.
BATCH_PREFIX = "aq:batch:"
BATCH_TAG_PREFIX = "b."
BATCH_SCHED_SUFFIX = ":sched"  # hash: the tenant's in-flight count and cap
# The sched hash's field: the tenant's batch lines admitted and not ended (its share of the
# tenant's max_in_flight, which a run's create reads too: core/tenant_limits.py).
BATCH_SCHED_IN_FLIGHT = "inflight"
# zset: the tenant's batches waiting for room under its in-flight cap, in turn order
BATCH_WAITING_SUFFIX = ":waiting"
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


def batch_waiting(tenant: str) -> str:
    return batch_base(tenant) + BATCH_WAITING_SUFFIX


def batch_index(tenant: str) -> str:
    return batch_base(tenant) + BATCH_INDEX_SUFFIX


def batch_tenant_keys(tenant: str) -> list[str]:
    """The KEYS every batch transition declares; a batch's own keys derive from them."""
    return [batch_sched(tenant), batch_waiting(tenant), batch_index(tenant)]


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


# A batch's Gemini cached contents (workers/models/gemini_cache/), one per shared prefix,
# by the prefix's digest: the resource's name (or "-": none), the claim of the one worker
# creating it, the list its waiters block on, and the batch's hash of what to delete.
BATCH_CACHED_INFIX = ":cached:"
BATCH_CACHED_CLAIM_SUFFIX = ":claim"
BATCH_CACHED_READY_SUFFIX = ":ready"
BATCH_CACHED_ALL_SUFFIX = ":cached"


def batch_cached_content(tenant: str, batch_id: str, digest: str) -> str:
    return batch_meta(tenant, batch_id) + BATCH_CACHED_INFIX + digest


def batch_cached_contents(tenant: str, batch_id: str) -> str:
    return batch_meta(tenant, batch_id) + BATCH_CACHED_ALL_SUFFIX


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


def batch_run_prefix(tenant: str, batch_id: str, nonce: str) -> str:
    """What the run ids of a batch's lines start with: in the tenant's namespace (two
    tenants' batches of one id never share a run id), with a nonce drawn when the batch
    is opened, so that nobody can take a line's id before the line runs."""
    return tenant_run_id(tenant, f"{batch_id}.{nonce}") + "."


def batch_end_job_id(run_id: str) -> str:
    """The job the end of a batch's run enqueues (in the run's slot, once per run)."""
    return JOB_PREFIX + tag(run_id) + BATCH_END_JOB_SUFFIX


def batch_kick_job_id(tenant: str, batch_id: str, nonce: str) -> str:
    """A job that admits a batch's first lines (after its upload, or a retry)."""
    return f"{JOB_PREFIX}{tag(BATCH_TAG_PREFIX + tenant)}{BATCH_KICK_INFIX}{batch_id}:{nonce}"


# -- schedules ------------------------------------------------------------------------
# A tenant's schedules share one hash tag, `{s.<tenant>}`, and so do their tick jobs: a
# tick's transition records it and enqueues the next tick's timer in one slot. A
# schedule's keys derive from (tenant, name): `aq:sched:{s.<tenant>}:<name>` and suffixes.
SCHEDULE_PREFIX = "aq:sched:"
SCHEDULE_TAG_PREFIX = "s."
SCHEDULE_INDEX_SUFFIX = ":index"  # zset: the tenant's schedule names, by creation time
SCHEDULE_TICKS_SUFFIX = ":ticks"  # hash: tick (ms) -> what it did, JSON
SCHEDULE_ORDER_SUFFIX = ":order"  # zset: the recorded ticks, by tick time
SCHEDULE_TICK_INFIX = ":tick:"


def schedule_base(tenant: str) -> str:
    return SCHEDULE_PREFIX + tag(SCHEDULE_TAG_PREFIX + tenant)


def schedule_index(tenant: str) -> str:
    return schedule_base(tenant) + SCHEDULE_INDEX_SUFFIX


def schedule_meta(tenant: str, name: str) -> str:
    return f"{schedule_base(tenant)}{JOB_SEPARATOR}{name}"


def schedule_keys(tenant: str, name: str) -> list[str]:
    """The KEYS every schedule transition declares (one slot: the tenant's tag)."""
    meta = schedule_meta(tenant, name)
    return [
        schedule_index(tenant),
        meta,
        meta + SCHEDULE_TICKS_SUFFIX,
        meta + SCHEDULE_ORDER_SUFFIX,
    ]


def schedule_tick_job_id(tenant: str, name: str, generation: int, tick_ms: int) -> str:
    """The job that fires one tick of one schedule: once per (schedule, tick)."""
    owner = tag(SCHEDULE_TAG_PREFIX + tenant)
    return f"{JOB_PREFIX}{owner}{SCHEDULE_TICK_INFIX}{name}:{generation}:{tick_ms}"


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


# -- provider batch APIs (workers/models/batch/) ----------------------------------
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
