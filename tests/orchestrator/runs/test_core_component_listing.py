"""A tenant's runs read a page at a time (runs/listing.py) on the embedded runtime: a
filtered list read on from its cursor, each request bounded, finds what one unbounded read
finds, in the same order; `tool` keeps the runs that called a tool, not those only offered
it; `scanned` says what a page read."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.runs.index import index_key
from tests.support.embedded_runs import TIMEOUT_S, Embedded
from tests.support.sample_tools import add
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


async def test_a_bounded_scan_read_on_finds_what_one_read_finds(start: Start) -> None:
    async with start([add]) as client:
        ids = []
        for n in range(12):
            steps = [calls(("add", {"a": n, "b": 1}))] if n % 4 == 0 else []
            spec = scripted(*steps, {"text": "ok"}, tools=["add"], id=f"r{n:02}", metadata={"n": n})
            ids.append(await client.runs.submit(spec))
        for run_id in ids:
            assert (await client.runs.wait(run_id, timeout_s=TIMEOUT_S)).status == "succeeded"

        whole = await client.runs.list(tool="add", limit=50)
        pages, cursor, scanned = [], None, []
        while True:
            page = await client.runs.list(tool="add", limit=50, cursor=cursor, scan_limit=5)
            pages += [r.id for r in page.runs]
            scanned.append(page.scanned)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        by_search = await client.runs.list(search="r0", limit=3, scan_limit=4)

    # Runs 0, 4 and 8 called add; the others were offered it and never called it.
    assert [r.id for r in whole.runs] == ["r08", "r04", "r00"]
    assert whole.scanned == 12
    assert pages == ["r08", "r04", "r00"]
    assert scanned == [5, 5, 2]
    # The first 4 runs read (r11..r08) hold one match: a short page, and a cursor on.
    assert ([r.id for r in by_search.runs], by_search.scanned) == (["r09", "r08"], 4)
    assert by_search.next_cursor is not None


async def test_a_run_left_unlisted_by_a_crash_is_listed_by_its_resubmission(start: Start) -> None:
    """The index is written after the create transition: a submitter that dies between
    the two (a schedule's tick on a killed worker) leaves the run unlisted, and the
    re-delivered submission, which finds the run created, lists it."""
    spec = scripted({"text": "ok"}, id="unlisted")
    async with start([]) as client:
        run_id = await client.runs.submit(spec)
        await client.redis.zrem(index_key(DEFAULT_TENANT), run_id)  # the crash's effect
        assert [r.id for r in (await client.runs.list()).runs] == []
        assert await client.runs.submit(spec) == run_id  # an idempotent no-op otherwise
        listed = await client.runs.list()
    assert [r.id for r in listed.runs] == [run_id]
