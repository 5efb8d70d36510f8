"""The parts of arq that agentq relies on and arq does not promise: if an installed arq
changes one, this fails and names it (workers/queue/arq_worker.py lists them)."""

from __future__ import annotations

import inspect
import re

import arq
import arq.constants
import arq.jobs
import arq.utils
import arq.worker
import pytest

from agentq.orchestrator.core import keys
from agentq.workers.queue.liveness import ARQ_RETRY_PREFIX

pytestmark = pytest.mark.unit

WORKER_ATTRIBUTES = {
    "_pool",  # behind the `pool` property; the subclass passes `redis_pool=`
    "ctx",
    "functions",
    "max_jobs",
    "job_counter",
    "tasks",
    "job_tasks",
    "aborting_tasks",
    "allow_abort_jobs",
    "allow_pick_jobs",
    "max_tries",
    "on_startup",
    "jobs_complete",
    "jobs_failed",
    "jobs_retried",
}


def test_the_key_layout_is_arqs() -> None:
    assert arq.constants.job_key_prefix == keys.ARQ_JOB_PREFIX
    assert arq.constants.result_key_prefix == keys.ARQ_RESULT_PREFIX
    assert arq.constants.in_progress_key_prefix == keys.ARQ_IN_PROGRESS_PREFIX
    assert arq.constants.abort_jobs_ss == keys.ARQ_ABORT_SET
    assert arq.constants.retry_key_prefix == ARQ_RETRY_PREFIX


def test_the_worker_still_has_what_the_subclass_uses() -> None:
    source = inspect.getsource(arq.worker.Worker.__init__)
    assigned = set(re.findall(r"self\.(\w+)\s*(?::[^=]+)?=", source))
    assert WORKER_ATTRIBUTES - assigned == set()
    parameters = inspect.signature(arq.worker.Worker.__init__).parameters
    assert {"functions", "queue_name", "poll_delay", "redis_pool"} <= set(parameters)
    assert isinstance(inspect.getattr_static(arq.worker.Worker, "pool"), property)
    assert inspect.iscoroutinefunction(arq.worker.Worker.main)


def test_the_helpers_the_subclass_calls_are_there() -> None:
    function = arq.worker.func(_job, name="job", max_tries=3)
    assert (function.coroutine, function.max_tries, function.name) == (_job, 3, "job")
    assert hasattr(function, "timeout_s")
    assert issubclass(arq.worker.RetryJob, Exception)
    assert issubclass(arq.jobs.SerializationError, Exception)
    assert next(iter(inspect.signature(arq.jobs.deserialize_job_raw).parameters)) == "r"
    assert isinstance(arq.utils.timestamp_ms(), int)
    assert arq.Retry is not None


async def _job(ctx: dict[str, object]) -> None:
    return None
