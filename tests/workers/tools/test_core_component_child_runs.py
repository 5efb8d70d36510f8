"""A child run's end-of-run transition enqueues the job that answers its parent's call,
whichever way it ends, once (on the in-memory Redis, through the real transitions)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE
from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.core.run_ids import ParentLink, child_run_id
from agentq.orchestrator.runs.children import ChildOf
from agentq.orchestrator.runs.state import FailureKind, MetaField, Outcome, RunFailure
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import create_args
from agentq.orchestrator.spec.run import RunSpec
from tests.support.embedded_runs import memory_run_store

pytestmark = pytest.mark.component

SPEC = RunSpec.model_validate({"model": {"provider": "scripted", "script": []}, "prompt": "go"})
LINK = ParentLink(run_id="parent-1", step=2, call_id="a1")


@pytest.fixture
async def store() -> AsyncIterator[RunStore]:
    async with memory_run_store("child-runs") as store:
        yield store


async def create_child(store: RunStore) -> str:
    child_id = child_run_id(LINK.run_id, LINK.step, LINK.call_id)
    args = create_args(
        child_id, SPEC, [], [UserMessage(content="go")], ChildOf(parent=LINK, depth=2)
    )
    assert (await store.create(args)).outcome == Outcome.CREATED
    return child_id


async def parent_jobs(store: RunStore, child_id: str) -> list[bytes]:
    job_id = keys.parent_job_id(child_id)
    queued = await store.redis.zrange(keys.job_queue(MODEL_QUEUE, job_id), 0, -1)
    return [j for j in queued if j.decode() == keys.parent_job_id(child_id)]


@pytest.mark.parametrize("end", ["cancel", "fail"])
async def test_the_end_of_a_child_enqueues_its_parents_answer_once(
    store: RunStore, end: str
) -> None:
    child_id = await create_child(store)
    meta = await store.meta(child_id)
    assert meta[MetaField.DEPTH] == "2"
    assert ParentLink.model_validate_json(meta[MetaField.PARENT]) == LINK
    assert await parent_jobs(store, child_id) == []
    for _ in range(2):  # the second is a duplicate delivery: CLOSED, nothing more
        if end == "cancel":
            await store.cancel(child_id, "stop")
        else:
            await store.fail_run(child_id, RunFailure(kind=FailureKind.INTERNAL, message="x"))
    assert len(await parent_jobs(store, child_id)) == 1
    assert await store.redis.exists(keys.arq_job(keys.parent_job_id(child_id)))


async def test_a_top_run_enqueues_no_parent_job(store: RunStore) -> None:
    args = create_args("top-1", SPEC, [], [UserMessage(content="go")])
    await store.create(args)
    await store.cancel("top-1", "stop")
    assert MetaField.PARENT not in await store.meta("top-1")
    queued = await store.redis.zrange(keys.queue(MODEL_QUEUE, keys.partition_of("top-1")), 0, -1)
    assert all(not j.decode().endswith(keys.PARENT_JOB_SUFFIX) for j in queued)
