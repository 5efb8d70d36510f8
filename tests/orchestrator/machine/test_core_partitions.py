"""The partitions: every key of a run, its job ids and the queues its jobs go to share
one hash slot; one partition keeps the single-Redis layout; the tags spread evenly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE, JobEnvelope
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.connect import partitions_for

pytestmark = pytest.mark.unit


@pytest.fixture
def sixteen() -> Iterator[None]:
    keys.use_partitions(16)
    yield
    keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


@pytest.mark.parametrize("count", [1, 2, 3, 16, 64])
def test_partition_tags_fall_in_equal_slot_ranges(count: int) -> None:
    tags = keys.partition_tags(count)
    width = REDIS_CLUSTER_HASH_SLOTS / count
    assert [int(key_slot(t.encode()) / width) for t in tags] == list(range(count))


def test_one_partition_keeps_the_single_redis_layout() -> None:
    assert keys.meta("r1") == "aq:run:{r1}"
    assert keys.model_job_id("r1", 2) == "aq:{r1}:2:model"
    assert keys.queue(MODEL_QUEUE) == "aq:queue:model"
    assert keys.abort_set(0) == "arq:abort"
    assert keys.worker_jobs("w1") == "aq:worker:w1:jobs"


def run_slots(run_id: str) -> set[int]:
    job = queued_job(JobEnvelope(kind="tool_call", run_id=run_id, step=3, call_id="c1"), "tools")
    names = [
        keys.meta(run_id),
        keys.messages(run_id),
        keys.events(run_id),
        keys.step(run_id, 3),
        keys.answer(run_id, "q1"),
        keys.workflow(run_id, 3, "c1"),
        keys.arq_job(job.job_id),
        keys.ARQ_IN_PROGRESS_PREFIX + job.job_id,
        job.queue_key,
        job.wake_key,
        keys.abort_set_of(job.job_id),
        keys.worker_jobs("w1", keys.job_partition(job.job_id)),
        keys.lease_holders(keys.job_partition(job.job_id)),
        keys.arq_job(keys.batch_end_job_id(run_id)),
        keys.arq_job(keys.parent_job_id(run_id)),
    ]
    return {key_slot(name.encode()) for name in names}


@pytest.mark.usefixtures("sixteen")
def test_every_key_of_a_run_and_of_its_jobs_shares_one_slot() -> None:
    for run_id in ("r1", "batch.1.1", "x" * 128):
        assert len(run_slots(run_id)) == 1, run_id
        assert (
            keys.meta(run_id) == f"aq:run:{keys.partition_tag(keys.partition_of(run_id))}:{run_id}"
        )


@pytest.mark.usefixtures("sixteen")
def test_calls_and_batches_keep_their_jobs_in_their_slot() -> None:
    call_job = keys.call_job_id("call1")
    assert key_slot(keys.call_meta("call1").encode()) == key_slot(
        keys.job_queue(TOOLS_QUEUE, call_job).encode()
    )
    kick = keys.batch_kick_job_id("acme", "b1", "seal")
    assert {
        key_slot(k.encode())
        for k in (
            keys.batch_sched("acme"),
            keys.batch_meta("acme", "b1"),
            keys.arq_job(kick),
            keys.job_queue(MODEL_QUEUE, kick),
        )
    } == {key_slot(keys.batch_sched("acme").encode())}


@pytest.mark.usefixtures("sixteen")
def test_runs_spread_over_every_partition() -> None:
    assert {keys.partition_of(f"run-{i}") for i in range(2000)} == set(range(16))
    assert keys.job_partition(keys.model_job_id("run-7", 1)) == keys.partition_of("run-7")
    assert keys.queue_name(keys.queue(MODEL_QUEUE, 5)) == MODEL_QUEUE
    assert keys.queue_name(keys.wake(TOOLS_QUEUE, 5)) == TOOLS_QUEUE


def test_the_partition_count_defaults_by_url_and_the_setting_wins() -> None:
    assert partitions_for("redis://h:1/0", Settings(partitions=None)) == 1
    assert partitions_for("memory://", Settings(partitions=None)) == 1
    assert partitions_for("redis+cluster://h:1", Settings(partitions=None)) == 16
    assert partitions_for("redis+cluster://h:1", Settings(partitions=4)) == 4
    with pytest.raises(ValueError, match="partitions"):
        keys.use_partitions(0)
