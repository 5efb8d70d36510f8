"""The Python API's typed output: `client.runs.submit(spec, output_type=Invoice)` sends the
model's JSON Schema, and `client.runs.wait(run_id, output_type=Invoice)` gives back an
`Invoice` (embedded runtime, scripted model)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.output.instructions import OUTPUT_TOOL
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST, TIMEOUT_S
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component


class Line(BaseModel):
    item: str
    amount: float


class Invoice(BaseModel):
    number: str
    lines: list[Line]
    total: float


ANSWER = {"number": "A-1", "lines": [{"item": "tea", "amount": 2.5}], "total": 2.5}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with embedded(settings=FAST) as started:
        yield started


async def test_the_output_comes_back_as_the_model(client: Client) -> None:
    bad = {"number": "A-1", "lines": [{"item": "tea"}], "total": 2.5}
    spec = scripted(calls((OUTPUT_TOOL, bad)), calls((OUTPUT_TOOL, ANSWER)))
    run_id = await client.runs.submit(spec, output_type=Invoice)
    stored = RunSpec.model_validate_json((await client.runs.store.meta(run_id))["spec"])
    assert stored.output is not None
    assert stored.output.schema_ == Invoice.model_json_schema()
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S, output_type=Invoice)
    assert result.succeeded, result.error
    assert result.output == Invoice.model_validate(ANSWER)
    assert isinstance(result.output.lines[0], Line)
    assert '"amount":2.5' in result.model_dump_json()  # still a JSON document
    plain = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert plain.output == ANSWER


async def test_the_mode_and_retries_of_the_spec_are_kept(client: Client) -> None:
    spec = scripted(
        {"text": "no"},
        {"text": '{"number": "B", "lines": [], "total": 0}'},
        output={"schema": Invoice.model_json_schema(), "mode": "prompted", "max_retries": 1},
    )
    run_id = await client.runs.submit(spec, output_type=Invoice)
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S, output_type=Invoice)
    assert result.output == Invoice(number="B", lines=[], total=0)


async def test_another_schema_beside_output_type_is_refused(client: Client) -> None:
    spec = scripted({"text": "x"}, output={"schema": {"type": "object"}})
    with pytest.raises(SpecError, match="not both"):
        await client.runs.submit(spec, output_type=Invoice)
