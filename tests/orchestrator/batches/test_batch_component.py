"""Batches against a real redis-server with in-process workers: admission within the
concurrency, results in input order, resumed uploads, duplicates, cancel, retry, each
batch admitting its own lines and, under a tenant's cap, the places handed to the
batches waiting for one (the settle transition driven directly)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentq.orchestrator.batches.admission import create_line_runs
from agentq.orchestrator.batches.api import BatchInfo, LineResult
from agentq.orchestrator.batches.input import BatchInputError
from agentq.orchestrator.batches.state import BatchSettle, SettleReply
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import TenantLimitError
from agentq.orchestrator.core.run_ids import child_run_id
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.tenant_limits import TenantLimit
from agentq.orchestrator.runs.state import MetaField
from agentq.workers.worker.embedded import embedded
from tests.support.redis_fixtures import redis_server, redis_url
from tests.support.sample_tools import nap, noop
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

__all__ = ["redis_server", "redis_url"]

FAST = Settings(idle_poll_s=0.1, lease_s=5.0)
TEMPLATE = scripted(calls(("noop", {})), {"text": "done"}, tools=["noop"], prompt="{{q}}")


def napping(seconds: float) -> dict[str, Any]:
    return scripted(
        {"tool_calls": [{"name": "nap", "input": {"seconds": seconds, "tag": "t"}}]},
        {"text": "slept"},
        tools=["nap"],
    )


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Client]:
    async with embedded(tools=[noop, nap], redis_url=redis_url, settings=FAST) as client:
        yield client


async def finished(client: Client, batch_id: str, timeout_s: float = 60) -> BatchInfo:
    async def check() -> BatchInfo | None:
        info = await client.batches.status(batch_id)
        return info if info.ended else None

    found: BatchInfo | None = await eventually_async(check, f"batch {batch_id} to end", timeout_s)
    assert found is not None
    return found


async def results(client: Client, batch_id: str) -> list[LineResult]:
    return [r async for r in client.batches.results(batch_id)]


async def max_in_flight(client: Client, rows: list[LineResult]) -> int:
    """The most runs alive at once, from the runs' own creation and end times."""
    edges: list[tuple[float, int]] = []
    for row in rows:
        assert row.run_id is not None
        meta = await client.runs.store.meta(row.run_id)
        edges += [(float(meta[MetaField.CREATED_AT]), 1), (float(meta[MetaField.FINISHED_AT]), -1)]
    live = peak = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        live += step
        peak = max(peak, live)
    return peak


class SubmitterDied(Exception):
    """The submitting process dies mid-upload."""


def lines(n: int) -> Iterator[dict[str, Any]]:
    return ({"vars": {"q": f"question {i}"}} for i in range(n))


async def test_lines_run_within_the_concurrency_and_results_come_in_input_order(
    client: Client,
) -> None:
    submitted = await client.batches.submit(
        lines(30), template=TEMPLATE, batch_id="b1", concurrency=4
    )
    batch_id = submitted.batch_id
    info = await finished(client, batch_id)
    assert (info.status, info.counts.succeeded, info.lines) == ("done", 30, 30)
    rows = await results(client, batch_id)
    assert [r.custom_id for r in rows] == [str(i) for i in range(1, 31)]
    assert {r.status for r in rows} == {"succeeded"}
    assert all(r.text == "done" for r in rows)
    prefix = str(rows[0].run_id).removesuffix("1.1")
    assert prefix.startswith("b1.")  # then the nonce drawn when the batch opened
    assert [r.run_id for r in rows] == [f"{prefix}{i}.1" for i in range(1, 31)]
    assert await max_in_flight(client, rows) <= 4
    assert info.admission_latency_avg_s is not None


async def test_a_resubmitted_id_resumes_its_upload_and_runs_each_line_once(
    client: Client,
) -> None:
    def interrupted() -> Iterator[dict[str, Any]]:
        for i, line in enumerate(lines(1200)):
            if i == 700:
                raise SubmitterDied
            yield {"custom_id": f"t{i}", **line}

    with pytest.raises(SubmitterDied):
        await client.batches.submit(interrupted(), template=TEMPLATE, batch_id="r1")
    # The first chunk (500 lines) was stored; nothing runs before the upload completes.
    partial = await client.batches.status("r1")
    assert (partial.status, partial.lines, partial.counts.running) == ("uploading", 500, 0)
    full = ({"custom_id": f"t{i}", **line} for i, line in enumerate(lines(1200)))
    result = await client.batches.submit(full, template=TEMPLATE, batch_id="r1", concurrency=64)
    assert (result.resumed, result.stored, result.lines) == (True, 700, 1200)
    again = await client.batches.submit(lines(1), template=TEMPLATE, batch_id="r1")
    assert again.existed
    await finished(client, "r1", timeout_s=180)
    rows = await results(client, "r1")
    assert [r.custom_id for r in rows] == [f"t{i}" for i in range(1200)]
    assert {(r.status, r.run_id.rsplit(".", 1)[1] if r.run_id else "") for r in rows} == {
        ("succeeded", "1")
    }


async def test_duplicate_custom_ids_are_refused_before_anything_starts(client: Client) -> None:
    rows = [{"custom_id": "a", "vars": {"q": "x"}}] * 2 + [{"custom_id": "b", "vars": {"q": "y"}}]
    with pytest.raises(BatchInputError, match=r"line 2 repeats line 1 \('a'\)"):
        await client.batches.submit(rows, template=TEMPLATE, batch_id="d1")
    assert await client.redis.exists(keys.batch_meta("default", "d1")) == 0


async def test_a_batchs_priority_is_the_weight_its_lines_take_turns_at(client: Client) -> None:
    """(core/fairness.py: the lane a run stores once, the claim reads.)"""
    with pytest.raises(BatchInputError, match="priority must be 1-100"):
        await client.batches.submit([{"vars": {"q": "x"}}], template=TEMPLATE, priority=101)
    rows = [{"custom_id": str(i), "vars": {"q": "x"}} for i in range(3)]
    await client.batches.submit(rows, template=TEMPLATE, batch_id="p3", priority=3)
    info = await finished(client, "p3")

    assert info.priority == 3
    for row in await results(client, "p3"):
        meta = await client.runs.store.meta(row.run_id or "")
        assert (meta[MetaField.FAIR_KEY], meta[MetaField.FAIR_WEIGHT]) == ("batch:p3", "3")


async def test_a_lines_sub_agent_takes_its_batchs_turns_at_its_weight(client: Client) -> None:
    child = scripted({"text": "ok"})
    helper = {"type": "agent", "name": "helper", "description": "A helper", "spec": child}
    ask = {"tool_calls": [{"name": "helper", "input": {"prompt": "go"}, "id": "h1"}]}
    template = scripted(ask, {"text": "done"}, tools=[helper])
    await client.batches.submit([{"custom_id": "a"}], template=template, batch_id="s3", priority=3)
    await finished(client, "s3")
    (row,) = await results(client, "s3")

    meta = await client.runs.store.meta(child_run_id(row.run_id or "", 0, "h1"))
    assert (meta[MetaField.FAIR_KEY], meta[MetaField.FAIR_WEIGHT]) == ("batch:s3", "3")


async def test_cancel_stops_admissions_and_cancels_the_runs_in_flight(client: Client) -> None:
    await client.batches.submit(
        ({"custom_id": str(i)} for i in range(12)),
        template=napping(30),
        batch_id="c1",
        concurrency=3,
    )

    async def running() -> BatchInfo | None:
        info = await client.batches.status("c1")
        return info if info.counts.running == 3 else None

    await eventually_async(running, "three lines to run")
    await client.batches.cancel("c1")
    info = await finished(client, "c1")
    assert info.status == "cancelled"
    assert (info.counts.cancelled, info.counts.queued, info.counts.running) == (12, 0, 0)
    rows = await results(client, "c1")
    assert sum(1 for r in rows if r.run_id) == 3  # only the admitted lines ever ran


async def test_a_line_admitted_before_a_cancel_and_created_after_it_is_cancelled(
    redis_url: str,
) -> None:
    """No workers: the test plays the admission job, with the batch's cancel landing
    between its settle (the lines are admitted) and the creation of their runs."""
    async with Client(redis_url, settings=FAST) as client:
        await client.batches.submit(
            ({"custom_id": str(i)} for i in range(5)),
            template=scripted({"text": "done"}),
            batch_id="late",
            concurrency=2,
        )
        settled = await client.batches.store.settle(
            "default", BatchSettle(batch_id="late", token="kick")
        )
        assert len(settled.admitted) == 2
        await client.batches.cancel("late")  # finds no run to cancel yet
        assert await create_line_runs(client, "default", settled.admitted) == [None, None]
        for admission in settled.admitted:
            assert (await client.runs.status(admission.run_id)).status == "cancelled"


async def test_retry_gives_failed_and_cancelled_lines_new_runs(client: Client) -> None:
    # Lines 2 and 4 name a tool nobody serves: they fail at admission.
    rows = [
        {
            "custom_id": str(i),
            "vars": {"q": "x"},
            "spec": {"tools": [{"type": "function", "name": "nope"}]},
        }
        if i in (2, 4)
        else {"custom_id": str(i), "vars": {"q": "x"}}
        for i in range(1, 6)
    ]
    await client.batches.submit(rows, template=TEMPLATE, batch_id="f1", concurrency=2)
    info = await finished(client, "f1")
    assert (info.counts.succeeded, info.counts.failed) == (3, 2)
    failed = [r async for r in client.batches.results("f1", statuses=["failed"])]
    assert [r.custom_id for r in failed] == ["2", "4"]
    assert all("nope" in (r.error or "") for r in failed)
    assert await client.batches.retry("f1") == 2
    info = await finished(client, "f1")
    assert (info.counts.succeeded, info.counts.failed, info.lines) == (3, 2, 5)
    again = {r.custom_id: r.run_id for r in await results(client, "f1")}
    prefix = str(again["1"]).removesuffix("1.1")
    assert prefix.startswith("f1.")  # then the nonce drawn when the batch opened
    assert (again["2"], again["4"]) == (prefix + "2.2", prefix + "4.2")


async def test_retry_of_cancelled_lines_runs_them_to_the_end(client: Client) -> None:
    await client.batches.submit(
        ({"custom_id": str(i), "vars": {"q": "x"}} for i in range(6)),
        template=TEMPLATE,
        batch_id="c2",
        concurrency=1,
    )
    await client.batches.cancel("c2")
    await finished(client, "c2")
    assert await client.batches.retry("c2", ["cancelled"]) >= 1
    info = await finished(client, "c2")
    assert (info.status, info.counts.succeeded) == ("done", 6)


async def test_listing_shows_the_tenants_batches_newest_first(client: Client) -> None:
    for name in ("l1", "l2"):
        await client.batches.submit(lines(2), template=TEMPLATE, batch_id=name)
    assert [b.id for b in await client.batches.list_batches()][:2] == ["l2", "l1"]
    for name in ("l1", "l2"):
        await finished(client, name)


async def play_ends(client: Client, reply: SettleReply, ends: int) -> list[str]:
    """Play the workers: end each admitted line in turn (its end settles its batch); the
    batches of the lines admitted, in order."""
    order: list[str] = []
    for n in range(ends):
        (admitted,) = reply.admitted
        order.append(admitted.batch_id)
        reply = await client.batches.store.settle(
            "default",
            BatchSettle(
                batch_id=admitted.batch_id,
                token=f"end{n}",
                line=admitted.line,
                run_id=admitted.run_id,
                record={"s": "succeeded", "u": {}},
            ),
        )
    return order


async def test_each_batch_admits_its_own_lines_without_turns(redis_url: str) -> None:
    """No workers: the test plays the kicks. Without a tenant cap, a batch's kick admits
    its own lines up to its concurrency, none of another batch's: the claim interleaves
    the batches' runs, admission takes no turns."""
    async with Client(redis_url, settings=FAST) as client:
        for name in ("a", "b"):
            await client.batches.submit(lines(5), template=TEMPLATE, batch_id=name, concurrency=3)
        store = client.batches.store
        kick_a = await store.settle("default", BatchSettle(batch_id="a", token="kick-a"))
        kick_b = await store.settle("default", BatchSettle(batch_id="b", token="kick-b"))
        assert [(a.batch_id, a.line) for a in kick_a.admitted] == [("a", 1), ("a", 2), ("a", 3)]
        assert [(a.batch_id, a.line) for a in kick_b.admitted] == [("b", 1), ("b", 2), ("b", 3)]
        # A line's end admits its own batch's next line.
        first = kick_b.admitted[0]
        ended = await store.settle(
            "default",
            BatchSettle(
                batch_id="b",
                token="end-b1",
                line=first.line,
                run_id=first.run_id,
                record={"s": "succeeded", "u": {}},
            ),
        )
        assert [(a.batch_id, a.line) for a in ended.admitted] == [("b", 4)]


async def test_under_the_tenants_cap_two_batches_take_the_freed_places_in_turn(
    redis_url: str,
) -> None:
    """No workers: the test plays them. A cap of one line in flight: the batch that began
    waiting for room longest gets each freed place, so both batches progress, neither
    waits for the other to finish."""
    limits = {"default": TenantLimit(max_in_flight=1)}
    async with Client(
        redis_url, settings=FAST.model_copy(update={"tenant_limits": limits})
    ) as client:
        for name in ("a", "b"):
            await client.batches.submit(lines(20), template=TEMPLATE, batch_id=name, concurrency=8)
        store = client.batches.store
        reply = await store.settle("default", BatchSettle(batch_id="a", token="kick-a"))
        # b's kick finds no room: b waits, behind a (which waits for its next line).
        assert (
            await store.settle("default", BatchSettle(batch_id="b", token="kick-b"))
        ).admitted == []
        order = await play_ends(client, reply, 9)
        assert order == ["a", "a", "b", "a", "b", "a", "b", "a", "b"]
        # A re-delivered admission job gets the same admissions again.
        again = await store.settle("default", BatchSettle(batch_id="a", token="end7"))
        assert [(a.batch_id, a.line) for a in again.admitted] == [("b", 4)]
        # The cap holds: one line in flight across both batches (a's fifth, b's turn next).
        running = [int((await store.meta("default", b))["running"]) for b in ("a", "b")]
        assert running == [1, 0]


async def test_two_batches_of_one_tenant_both_progress(redis_url: str) -> None:
    """Real admissions by in-process workers: two batches of one tenant, each of 6
    napping lines, with and without a tenant cap below their concurrency: the second
    batch's first run is created before the first batch's last run ends."""
    for limits in ({}, {"default": TenantLimit(max_in_flight=2)}):
        settings = FAST.model_copy(update={"tenant_limits": limits})
        async with embedded(tools=[noop, nap], redis_url=redis_url, settings=settings) as client:
            spec = napping(0.2)
            for name in ("first", "second"):
                await client.batches.submit(lines(6), template=spec, batch_id=name, concurrency=2)
            rows = {}
            for name in ("first", "second"):
                await finished(client, name)
                rows[name] = [
                    await client.runs.store.meta(r.run_id)
                    for r in await results(client, name)
                    if r.run_id is not None
                ]
            first_ends = max(float(m[MetaField.FINISHED_AT]) for m in rows["first"])
            second_starts = min(float(m[MetaField.CREATED_AT]) for m in rows["second"])
            assert second_starts < first_ends, limits
            await client.redis.flushall()


async def test_batch_lines_and_direct_runs_share_one_in_flight_cap(redis_url: str) -> None:
    """No workers: runs stay in flight until cancelled; the test plays the admissions."""
    limits = {"default": TenantLimit(max_in_flight=2)}
    async with Client(
        redis_url, settings=FAST.model_copy(update={"tenant_limits": limits})
    ) as client:
        direct = [await client.runs.submit(scripted({"text": "x"})) for _ in range(2)]
        await client.batches.submit(lines(3), template=TEMPLATE, batch_id="shared", concurrency=8)
        store = client.batches.store
        # The tenant's two direct runs fill its cap: no line is admitted beside them.
        reply = await store.settle("default", BatchSettle(batch_id="shared", token="k1"))
        assert reply.admitted == []
        await client.runs.cancel(direct[0])
        reply = await store.settle("default", BatchSettle(batch_id="shared", token="k2"))
        (admitted,) = reply.admitted  # one place freed, one line
        await client.runs.create(
            scripted({"text": "line"}), run_id=admitted.run_id, batch_line=True
        )
        # One direct run and one line in flight: a direct run is refused at the cap.
        with pytest.raises(TenantLimitError, match="tenant_max_in_flight of 2"):
            await client.runs.submit(scripted({"text": "x"}))
        # Each counted once: the line in its batches' count, the direct run in the load's.
        (load,) = (await client.runs.store.tenant_load("default")).values()
        assert load[0] == 1
        assert await client.runs.store.batch_lines_in_flight("default") == 1
        await client.runs.cancel(admitted.run_id)
        await client.runs.cancel(direct[1])
        assert (await client.runs.store.tenant_load("default")) == {0: (0, 0)}
