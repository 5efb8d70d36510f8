"""The JobKind table (orchestrator/core/jobs.py) and the handlers registered against it."""

from __future__ import annotations

import json

import pytest

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import (
    MODEL_QUEUE,
    RESUMED_STEP,
    BatchJobEnvelope,
    JobEnvelope,
    JobKind,
)
from agentq.orchestrator.core.jobs import JOBS, job_id, queued_job
from agentq.workers.jobs import registry

pytestmark = pytest.mark.unit


def test_the_table_declares_every_kind_once() -> None:
    assert list(JOBS) == list(JobKind)
    assert all(kind == job.kind for kind, job in JOBS.items())


def test_every_kind_has_exactly_one_handler_and_every_handler_a_kind() -> None:
    handlers = registry.job_handlers()
    assert set(handlers) == set(JobKind)
    assert len(set(map(id, handlers.values()))) == len(handlers)


def test_a_second_handler_for_a_kind_is_refused() -> None:
    async def other(ctx: dict[str, object], payload: dict[str, object]) -> None: ...

    registry.job_handlers()
    with pytest.raises(registry.HandlerConflict):
        registry.handles(JobKind.MODEL_STEP)(other)


@pytest.mark.parametrize(
    ("envelope", "expected"),
    [
        (JobEnvelope(kind=JobKind.MODEL_STEP, run_id="r", step=2), keys.model_job_id("r", 2)),
        (
            JobEnvelope(kind=JobKind.MODEL_STEP, run_id="r", step=2, call_id=RESUMED_STEP),
            keys.resumed_model_job_id("r", 2),
        ),
        (
            JobEnvelope(kind=JobKind.TOOL_CALL, run_id="r", step=1, call_id="c"),
            keys.tool_job_id("r", 1, "c"),
        ),
        (JobEnvelope(kind=JobKind.CALL, run_id="k", step=0, call_id="k"), keys.call_job_id("k")),
        (JobEnvelope(kind=JobKind.CHILD_ENDED, run_id="ch", step=0), keys.parent_job_id("ch")),
        (
            BatchJobEnvelope(tenant="t", batch_id="b", line=3, run_id="r"),
            keys.batch_end_job_id("r"),
        ),
        (
            BatchJobEnvelope(tenant="t", batch_id="b", nonce="seal"),
            keys.batch_kick_job_id("t", "b", "seal"),
        ),
    ],
)
def test_a_job_id_derives_from_its_payload(
    envelope: JobEnvelope | BatchJobEnvelope, expected: str
) -> None:
    assert job_id(envelope) == expected


def test_a_queued_job_is_in_arq_layout_on_its_kind_queue() -> None:
    job = queued_job(BatchJobEnvelope(tenant="t", batch_id="b", nonce="seal"))
    body = json.loads(job.payload)
    assert body["f"] == "batch_admit"
    assert body["a"][0]["batch_id"] == "b"
    assert job.queue_key == keys.job_queue(MODEL_QUEUE, job.job_id)


def test_a_kind_without_a_queue_of_its_own_needs_one_named() -> None:
    envelope = JobEnvelope(kind=JobKind.TOOL_CALL, run_id="r", step=0, call_id="c")
    with pytest.raises(ValueError, match="names"):
        queued_job(envelope)
    assert queued_job(envelope, "tools").queue_key == keys.job_queue("tools", job_id(envelope))
