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


def arq_job(job_id: str) -> str:
    return ARQ_JOB_PREFIX + job_id
