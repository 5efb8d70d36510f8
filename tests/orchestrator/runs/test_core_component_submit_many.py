"""`Runs.submit_many`: many runs created in a round trip per chunk, every spec checked
before any run exists, a refusal told with the index of the spec it refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentq.orchestrator.core.errors import RunConflictError, SpecError, UnknownToolError
from tests.support.embedded_runs import TIMEOUT_S, Embedded
from tests.support.sample_tools import add
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


async def test_every_run_is_created_and_runs_in_the_order_given(start: Start) -> None:
    specs = [scripted(calls(("add", {"a": 2, "b": 1})), {"text": "run 0"}, tools=["add"])]
    specs += [scripted({"text": f"run {i}"}) for i in range(1, 12)]
    async with start([add]) as client:
        ids = await client.runs.submit_many(specs, tenant="t1", chunk=5)
        assert len(set(ids)) == len(specs)
        results = [await client.runs.wait(run_id, timeout_s=TIMEOUT_S) for run_id in ids]
        page = await client.runs.list("t1", limit=100)
    assert [r.text for r in results] == ["run 0", *(f"run {i}" for i in range(1, 12))]
    assert {r.status for r in results} == {"succeeded"}
    assert results[0].steps[0].tool_calls[0].name == "add"
    assert {run.id for run in page.runs} == set(ids)  # listed under the tenant


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (scripted({"text": "x"}, tools=["no_such_tool"]), UnknownToolError),
        ({"model": {"provider": "scripted"}, "prompt": 3}, SpecError),  # malformed
    ],
    ids=["unknown tool", "malformed"],
)
async def test_a_bad_spec_is_refused_by_its_index_before_any_run_is_created(
    start: Start, bad: dict[str, object], error: type[SpecError]
) -> None:
    specs = [scripted({"text": "fine"}) for _ in range(5)]
    specs.insert(3, bad)
    async with start([add]) as client:
        with pytest.raises(error, match=r"^spec 3: "):
            await client.runs.submit_many(specs, chunk=2)
        page = await client.runs.list(limit=100)
    assert page.runs == []


async def test_a_taken_id_is_told_by_its_index_and_the_other_runs_are_created(
    start: Start,
) -> None:
    async with start([add]) as client:
        await client.runs.submit(scripted({"text": "first"}, id="taken"))
        specs = [scripted({"text": "a"}), scripted({"text": "other"}, id="taken")]
        specs.append(scripted({"text": "b"}))
        with pytest.raises(RunConflictError, match=r"^spec 1: run id .*taken"):
            await client.runs.submit_many(specs)
        page = await client.runs.list(limit=100)
    assert len(page.runs) == 3  # "taken" as first submitted, and the runs around it
