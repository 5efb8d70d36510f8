"""A step's record (the `resp` field commit_step stores once, which results, forks and
replays read back) is written by orjson as events are: strict JSON, whatever a model or
a tool put in it, and an integer past 64 bits in a call's input kept whole."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.loop.plan import CallPlan, StepPlan
from agentq.orchestrator.runs.state import CallStatus, StepAfter
from agentq.orchestrator.runs.transitions import commit_args

pytestmark = pytest.mark.unit


def _record(input_: dict[str, Any], metadata: dict[str, Any] | None = None) -> Any:
    call = CallPlan(id="c1", name="add", input=input_, status=CallStatus.QUEUED, queue="tools")
    plan = StepPlan(
        step=0,
        text="",
        finish_reason="tool-calls",
        calls=[call],
        after=StepAfter.CONTINUE,
        provider_metadata=metadata or {},
    )

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(commit_args("r", plan).resp, parse_constant=refuse)


def test_a_step_record_is_strict_json_whatever_the_provider_said() -> None:
    record = _record({"a": 1}, {"score": float("nan"), "top": float("inf")})
    assert record["provider_metadata"] == {"score": None, "top": None}
    assert record["tool_calls"] == [{"id": "c1", "name": "add", "input": {"a": 1}}]


def test_an_integer_past_64_bits_in_a_call_s_input_is_kept() -> None:
    assert _record({"n": 2**70})["tool_calls"][0]["input"] == {"n": 2**70}
