"""A transition's stored-as-is JSON travels beside its input, not inside it (no Redis
needed): Redis's cjson decodes a script's input byte by byte on every call, so a tool's
result or an event nested in ARGV[1] was escaped by the caller and unescaped by Redis only
to be stored as it came. `script_args` puts each `Spilled` field in an ARGV of its own and
ARGV[1] names it by its index."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.machine.transition import script_args
from agentq.orchestrator.runs.state import CallRecord, CallStatus, CommitStep, StepAfter
from agentq.orchestrator.runs.transitions import model_job, result_args

pytestmark = pytest.mark.unit

RUN = "r1"
OUTPUT = "x" * 1024


def _argv(args: list[str]) -> tuple[dict[str, Any], dict[int, str]]:
    """ARGV[1] decoded, and the other entries by their Lua index."""
    return json.loads(args[0]), {i + 2: value for i, value in enumerate(args[1:])}


def test_a_results_bytes_are_not_in_the_input_the_script_decodes() -> None:
    part = ToolResultPart(tool_call_id="c1", tool_name="t", output=OUTPUT)
    transition = result_args(RUN, 0, part)
    args = script_args(transition, retention_s=60)
    body, spilled = _argv(args)
    assert OUTPUT not in args[0]
    assert body["retention_s"] == 60
    assert spilled[body["result"]] == transition.result
    assert [spilled[i] for i in body["events"]] == transition.events


def test_a_commits_records_and_events_travel_beside_it_in_order() -> None:
    call = json.dumps({"id": "c1", "name": "t"})
    answered = json.dumps({"type": "tool-result", "tool_call_id": "c2"})
    commit = CommitStep(
        run_id=RUN,
        step=0,
        resp='{"index": 0}',
        assistant='{"role":"assistant","content":[]}',
        text="",
        finish_reason="tool-calls",
        usage={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        after=StepAfter.CONTINUE,
        order='["c1","c2"]',
        calls=[
            CallRecord(id="c1", call=call, status=CallStatus.QUEUED),
            CallRecord(id="c2", call=call, status=CallStatus.DONE, result=answered),
        ],
        events=['{"type":"tool-call"}', '{"type":"finish-step"}'],
        jobs=[],
        pending=1,
        parked=0,
        finishes_now=False,
        next_job=model_job(RUN, 1),
    )
    body, spilled = _argv(script_args(commit))
    assert spilled[body["resp"]] == commit.resp
    assert spilled[body["assistant"]] == commit.assistant
    records = body["calls"]
    assert [spilled[c["call"]] for c in records] == [call, call]
    assert spilled[records[1]["result"]] == answered
    assert "result" not in records[0]
    assert [spilled[i] for i in body["events"]] == commit.events
    # What the script reads itself stays in ARGV[1]; nothing else is dumped differently.
    assert body["order"] == commit.order
    assert json.loads(commit.model_dump_json())["resp"] == commit.resp


def test_a_job_sent_with_its_transition_has_its_payload_beside_the_input() -> None:
    transition = result_args(RUN, 0, ToolResultPart(tool_call_id="c1", tool_name="t", output=""))
    body, spilled = _argv(script_args(transition))
    job = body["next_job"]
    # The job's own fields stay in ARGV[1] (the script reads them); its payload, arq's JSON
    # stored as it is, does not.
    assert job["job_id"] == transition.next_job.job_id
    assert spilled[job["payload"]] == transition.next_job.payload
    assert transition.next_job.payload not in script_args(transition)[0]
    # Dumped on its own (a stored job, a trace's stamp), a job keeps its payload.
    assert json.loads(transition.model_dump_json())["next_job"]["payload"] == (
        transition.next_job.payload
    )
