"""`agentq serve` traces its doors: a real redis-server, a real `agentq worker` process
and a real `agentq serve` process export to an OTLP/HTTP receiver in this process."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agentq.orchestrator import tracing
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.trace_shape import assert_openinference_kinds, has_root

pytestmark = pytest.mark.integration

# The caller's own span: a W3C traceparent as an instrumented HTTP client sends it.
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
SERVER, PRODUCER, CONSUMER = 2, 4, 5


@pytest.fixture
def traced(redis_url: str) -> Iterator[tuple[OtlpReceiver, ServeProcess]]:
    with OtlpReceiver() as receiver:
        worker = WorkerProcess(redis_url, "--tools", TOOLS, env=receiver.env("worker"))
        try:
            wait_ready(worker)
            api = ServeProcess(redis_url, env=receiver.env("serve"))
            try:
                yield receiver, api
            finally:
                api.stop()
        finally:
            worker.stop()


def _trace(receiver: OtlpReceiver, trace_id: str) -> list[ReceivedSpan]:
    def complete(spans: list[ReceivedSpan]) -> bool:
        mine = [s for s in spans if s.trace_id == trace_id]
        return has_root(mine) and any(s.service == "serve" for s in mine)

    return [s for s in receiver.wait_for(complete, "the run's trace") if s.trace_id == trace_id]


def test_a_submission_with_a_traceparent_parents_the_run(
    traced: tuple[OtlpReceiver, ServeProcess],
) -> None:
    receiver, api = traced
    spec = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]}, {"text": "3"}, tools=["add"]
    )
    headers = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
    with httpx.Client(base_url=api.url, timeout=60) as http:
        created = http.post("/v1/runs", json=spec, headers=headers)
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        done = http.get(f"/v1/runs/{run_id}", params={"wait": 30}).json()
    assert done["status"] == "succeeded"
    assert run_id.startswith(f"t{CALLER_TRACE}.")  # minted in the caller's trace

    spans = _trace(receiver, CALLER_TRACE)
    doors = [s for s in spans if s.service == "serve" and s.kind == SERVER]
    (door,) = doors
    assert door.name == "POST /v1/runs"
    assert door.parent_id == CALLER_SPAN
    assert door.attributes["http.route"] == "/v1/runs"
    assert door.attributes["http.response.status_code"] == 201
    (root,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert root.parent_id == door.span_id
    # The queue's plumbing has the messaging conventions' kinds; the agent's spans are
    # the agent's, the model's and the tool's, beside it.
    assert {s.kind for s in spans if s.name.startswith("send ")} == {PRODUCER}
    assert {s.kind for s in spans if s.name.startswith("process ")} == {CONSUMER}
    assert len([s for s in spans if s.name.startswith("chat ")]) == 2
    assert len([s for s in spans if s.name == "execute_tool add"]) == 1
    # In a trace viewer the door and the plumbing are CHAIN spans, none of no kind.
    assert_openinference_kinds(spans)
    assert door.attributes["openinference.span.kind"] == "CHAIN"


def test_a_submission_without_a_traceparent_starts_the_runs_trace(
    traced: tuple[OtlpReceiver, ServeProcess],
) -> None:
    receiver, api = traced
    with httpx.Client(base_url=api.url, timeout=60) as http:
        created = http.post("/v1/runs", json=scripted({"text": "hi"}))
        run_id = created.json()["id"]
        assert http.get(f"/v1/runs/{run_id}", params={"wait": 30}).json()["status"] == "succeeded"
    trace_id = run_id.removeprefix("t").split(".")[0]
    spans = _trace(receiver, trace_id)
    (door,) = [s for s in spans if s.kind == SERVER]
    (root,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert (door.parent_id, root.parent_id) == ("", door.span_id)
    # The reads (the `?wait=` GET) have no span: they would bury the run's.
    assert {s.name for s in receiver.wait_for(bool, "spans") if s.kind == SERVER} == {
        "POST /v1/runs"
    }


def test_a_run_with_its_own_id_keeps_its_trace_and_links_the_submission(
    traced: tuple[OtlpReceiver, ServeProcess],
) -> None:
    receiver, api = traced
    headers = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
    with httpx.Client(base_url=api.url, timeout=60) as http:
        created = http.post("/v1/runs", json=scripted({"text": "hi"}, id="own-id"), headers=headers)
        assert created.json()["id"] == "own-id"
        assert http.get("/v1/runs/own-id", params={"wait": 30}).json()["status"] == "succeeded"
    own_trace = format(tracing.run_ids("own-id")[0], "032x")
    (root,) = [s for s in _trace_root(receiver, own_trace) if s.name.startswith("invoke_agent")]
    assert root.parent_id == ""

    # The door's span comes from serve's exporter, the run's from the worker's: wait
    # for each on its own, neither arrives with the other.
    def is_door(span: ReceivedSpan) -> bool:
        return span.kind == SERVER and span.trace_id == CALLER_TRACE

    spans = receiver.wait_for(lambda got: any(map(is_door, got)), "the door's span")
    (door,) = [s for s in spans if is_door(s)]
    assert root.links == ((CALLER_TRACE, door.span_id),)


def _trace_root(receiver: OtlpReceiver, trace_id: str) -> list[ReceivedSpan]:
    spans = receiver.wait_for(
        lambda got: has_root([s for s in got if s.trace_id == trace_id]), "the run's span"
    )
    return [s for s in spans if s.trace_id == trace_id]
