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
WORKFLOW_INFIX = ":wf:"
WORKFLOW_SEPARATOR = ":"  # between the step and the call id of a workflow's hash

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
# A parked call some job starts (a sub-agent's child run, a workflow's first nodes).
START_JOB_INFIX = ":start:"
# A child run's end hands its parent's call the result (tagged with the child's id).
PARENT_JOB_SUFFIX = "parent"
# One node of a workflow call: `...:node:<call id>:<node id>`.
NODE_JOB_INFIX = ":node:"


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


def workflow(run_id: str, step: int, call_id: str) -> str:
    """A hash of a workflow call's node results (node id -> result JSON, written once)."""
    return f"{meta(run_id)}{WORKFLOW_INFIX}{step}{WORKFLOW_SEPARATOR}{call_id}"


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


def start_job_id(run_id: str, step: int, call_id: str) -> str:
    return f"{job_prefix(run_id)}{step}{START_JOB_INFIX}{call_id}"


def parent_job_id(child_run_id: str) -> str:
    return job_prefix(child_run_id) + PARENT_JOB_SUFFIX


def node_job_id(run_id: str, step: int, call_id: str, node: str) -> str:
    return f"{job_prefix(run_id)}{step}{NODE_JOB_INFIX}{call_id}{JOB_SEPARATOR}{node}"


def arq_job(job_id: str) -> str:
    return ARQ_JOB_PREFIX + job_id
