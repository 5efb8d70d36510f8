"""Remote tools: a Node worker (plain fetch) leases calls from a real `agentq serve`,
heartbeats, reports progress and results, against a real redis-server and a real run;
a Node worker killed mid-call has its call re-delivered, and the run completes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.infra import REPO, missing
from tests.support.remote_tools import remote_tools_file
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

NODE_WORKER = REPO / "tests/support/node/remote_worker.mjs"
SHOUT_RUN = scripted(
    calls(("shout", {"text": "hi"})), {"text": "done"}, tools=[{"type": "remote", "name": "shout"}]
)


ENDED = ("succeeded", "failed", "cancelled")


class NodeWorker:
    def __init__(self, server: ServeProcess, mode: str = "work") -> None:
        node = shutil.which("node")
        if node is None:
            missing("node", "install Node 20 (apt-get install -y nodejs)")
        self.log_path = Path(tempfile.mkstemp(prefix="agentq-node-", suffix=".log")[1])
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [str(node), str(NODE_WORKER)],
            env={**os.environ, "AGENTQ_URL": server.url, "QUEUE": "node-tools", "MODE": mode},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def lines(self) -> list[dict[str, Any]]:
        text = self.log_path.read_text(errors="replace")
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"text": line})
        return out

    def wait_for(self, key: str) -> None:
        def seen() -> bool:
            exited = self.proc.poll() is not None  # read before the lines: its last words count
            if any(key in line for line in self.lines()):
                return True
            if exited:
                raise AssertionError(f"node worker exited ({self.proc.returncode}): {self.lines()}")
            return False

        eventually(seen, f"the node worker to log {key!r}", 30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()


@pytest.fixture
def remote_server(redis_url: str, worker: Any) -> Iterator[ServeProcess]:
    process = ServeProcess(
        redis_url, env={"AGENTQ_REMOTE_TOOLS": remote_tools_file(), "AGENTQ_LEASE_S": "2"}
    )
    yield process
    process.stop()


def submit(server: ServeProcess, spec: dict[str, Any]) -> str:
    response = httpx.post(f"{server.url}/v1/runs", json=spec, timeout=30)
    assert response.status_code == 201, response.text
    run_id: str = response.json()["id"]
    return run_id


def finished(server: ServeProcess, run_id: str) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        got: dict[str, Any] = httpx.get(
            f"{server.url}/v1/runs/{run_id}", params={"wait": 5}, timeout=30
        ).json()
        return got

    return eventually(run, f"run {run_id} to end", 60, until=lambda r: r["status"] in ENDED)


def events(server: ServeProcess, run_id: str) -> list[dict[str, Any]]:
    """The ended run's events, as JSON lines."""
    response = httpx.get(
        f"{server.url}/v1/runs/{run_id}/events",
        headers={"accept": "application/x-ndjson"},
        timeout=30,
    )
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def test_a_node_worker_leases_heartbeats_reports_progress_and_the_result(
    remote_server: ServeProcess,
) -> None:
    node = NodeWorker(remote_server)
    try:
        run_id = submit(remote_server, SHOUT_RUN)
        run = finished(remote_server, run_id)
        assert run["status"] == "succeeded", run
        seen = events(remote_server, run_id)
        progress = [e for e in seen if e["type"] == "tool-progress"]
        assert progress
        assert progress[0]["output"]["stage"] == "working"
        results = [e for e in seen if e["type"] == "tool-result"]
        assert [r["output"] for r in results] == [{"upper": "HI", "attempt": 1}]
        assert any(line.get("recorded") is True for line in node.lines())
    finally:
        node.kill()


def test_a_workflow_tool_node_calls_a_remote_tool_the_node_worker_leases(
    remote_server: ServeProcess,
) -> None:
    caller = {
        "type": "workflow",
        "name": "caller",
        "graph": {
            "nodes": [
                {"id": "in", "kind": "input"},
                {
                    "id": "call",
                    "kind": "tool",
                    "tool": {"type": "remote", "name": "shout"},
                    "input": {"text": "{{in.t}}"},
                },
                {"id": "out", "kind": "output", "value": {"shouted": "{{call.upper}}"}},
            ],
            "edges": [["in", "call"], ["call", "out"]],
        },
    }
    spec = scripted(calls(("caller", {"t": "hi"})), {"text": "done"}, tools=[caller])
    node = NodeWorker(remote_server)
    try:
        run = finished(remote_server, submit(remote_server, spec))
        assert run["status"] == "succeeded", run
        assert run["steps"][0]["tool_results"][0]["output"] == {"shouted": "HI"}
        assert any(line.get("recorded") is True for line in node.lines())
    finally:
        node.kill()


def test_a_call_whose_node_worker_dies_is_re_delivered_and_completes(
    remote_server: ServeProcess,
) -> None:
    dying = NodeWorker(remote_server, mode="hang")
    try:
        run_id = submit(remote_server, SHOUT_RUN)
        dying.wait_for("progress")
    finally:
        dying.kill()
    rescuer = NodeWorker(remote_server)
    try:
        run = finished(remote_server, run_id)
        assert run["status"] == "succeeded", run
        results = [e for e in events(remote_server, run_id) if e["type"] == "tool-result"]
        assert [r["output"] for r in results] == [{"upper": "HI", "attempt": 2}]
    finally:
        rescuer.kill()


def test_the_lease_endpoints_refuse_unknown_queues_and_unknown_leases(
    remote_server: ServeProcess,
) -> None:
    unknown = httpx.post(f"{remote_server.url}/v1/queues/tools/lease", json={}, timeout=30)
    assert unknown.status_code == 404, unknown.text
    gone = httpx.post(
        f"{remote_server.url}/v1/leases/lease-nope/result", json={"output": 1}, timeout=30
    )
    assert gone.status_code == 404, gone.text
    assert "re-delivered" not in gone.text


def test_a_pushed_call_is_signed_retried_on_5xx_and_answered_synchronously(
    redis_url: str, worker: Any
) -> None:
    from agentq.orchestrator.policy.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
    from tests.support.receiver import Receiver

    receiver = Receiver([(503, {}), (200, {"output": {"pushed": "HI"}})])
    hook = {"url": receiver.url, "secret_env": "PUSH_SECRET", "backoff_s": 0.05}
    server = ServeProcess(
        redis_url,
        env={
            "AGENTQ_REMOTE_TOOLS": remote_tools_file(**{"node-tools": hook}),
            "PUSH_SECRET": "s3cret",
        },
    )
    try:
        run_id = submit(server, SHOUT_RUN)
        run = finished(server, run_id)
        assert run["status"] == "succeeded", run
        results = [e for e in events(server, run_id) if e["type"] == "tool-result"]
        assert [r["output"] for r in results] == [{"pushed": "HI"}]
        deliveries = receiver.wait_for(2)
        for headers, body in deliveries:
            lower = {k.lower(): v for k, v in headers.items()}
            assert verify(
                "s3cret", lower[TIMESTAMP_HEADER.lower()], body, lower[SIGNATURE_HEADER.lower()]
            )
            pushed = json.loads(body)
            assert pushed["call"]["input"] == {"text": "hi"}
            assert pushed["lease"]["id"].startswith("lease-")
    finally:
        server.stop()
        receiver.close()


def test_a_second_result_on_an_answered_lease_says_the_call_is_done(
    remote_server: ServeProcess,
) -> None:
    run_id = submit(remote_server, SHOUT_RUN)
    leased = httpx.post(
        f"{remote_server.url}/v1/queues/node-tools/lease",
        json={"max": 1, "wait_s": 30, "lease_s": 60},
        timeout=60,
    ).json()["calls"]
    (lease_id,) = [c["lease"]["id"] for c in leased]
    url = f"{remote_server.url}/v1/leases/{lease_id}/result"
    first = httpx.post(url, json={"output": "HI"}, timeout=30)
    assert first.status_code == 200, first.text
    again = httpx.post(url, json={"output": "other"}, timeout=30)
    assert again.status_code == 409, again.text
    error = again.json()["error"]
    assert error["type"] == "lease_answered"
    assert "re-delivered" not in error["message"]
    assert "the call already has its result" in error["message"]
    run = finished(remote_server, run_id)
    assert run["status"] == "succeeded", run
    (answer,) = run["steps"][0]["tool_results"]
    assert answer["output"] == "HI"


def test_a_leased_call_past_its_deadline_becomes_a_timeout_error(
    remote_server: ServeProcess,
) -> None:
    spec = scripted(
        calls(("shout", {"text": "hi"})),
        {"text": "done"},
        tools=[{"type": "remote", "name": "shout", "timeout_s": 1}],
    )
    run_id = submit(remote_server, spec)
    leased = httpx.post(
        f"{remote_server.url}/v1/queues/node-tools/lease",
        json={"max": 1, "wait_s": 30, "lease_s": 60},
        timeout=60,
    ).json()["calls"]
    (lease_id,) = [c["lease"]["id"] for c in leased]

    def heartbeat() -> httpx.Response:
        return httpx.post(
            f"{remote_server.url}/v1/leases/{lease_id}/heartbeat", json={"lease_s": 60}, timeout=30
        )

    refused = eventually(
        heartbeat, "the call's deadline to pass", 60, until=lambda r: r.status_code != 200
    )
    assert refused.status_code == 410
    assert refused.json()["error"]["type"] == "call_timed_out"
    run = finished(remote_server, run_id)
    assert run["status"] == "succeeded", run
    errors = [e for e in events(remote_server, run_id) if e["type"] == "tool-error"]
    assert "timed out" in str(errors[0]["error"])


async def test_a_call_without_a_run_is_leased_by_the_node_worker_and_re_delivered(
    remote_server: ServeProcess, redis_url: str
) -> None:
    """`call_tool` on a remote tool: a `call` job on its queue, leased over HTTP like a
    run's call; a lease that lapses (its worker killed) is re-delivered, and the result
    is the call's own, written once."""
    from agentq.orchestrator.client import Client

    dying = NodeWorker(remote_server, mode="hang")
    try:
        async with Client(redis_url) as client:
            call_id, _, _ = await client.calls.start("shout", {"text": "hi"}, timeout_s=60)
            dying.wait_for("progress")
            dying.kill()
            rescuer = NodeWorker(remote_server)
            try:
                progress: list[Any] = []
                result = await client.calls.call(
                    "shout", {"text": "again"}, timeout_s=60, on_progress=progress.append
                )
                assert not result.is_error, result
                assert result.output == {"upper": "AGAIN", "attempt": 1}
                assert progress
                assert progress[0]["stage"] == "working"
                redelivered = await client.calls.wait(call_id, timeout_s=120)
                assert redelivered is not None, "the re-delivered call to end"
                assert redelivered.output == {"upper": "HI", "attempt": 2}, redelivered
            finally:
                rescuer.kill()
    finally:
        dying.kill()


async def test_a_call_without_a_run_is_pushed_to_the_queue_webhook(
    redis_url: str, worker: Any
) -> None:
    from agentq.orchestrator.client import Client
    from tests.support.receiver import Receiver

    receiver = Receiver([(503, {}), (200, {"output": {"pushed": "HI"}})])
    hook = {"url": receiver.url, "secret_env": "PUSH_SECRET", "backoff_s": 0.05}
    server = ServeProcess(
        redis_url,
        env={
            "AGENTQ_REMOTE_TOOLS": remote_tools_file(**{"node-tools": hook}),
            "PUSH_SECRET": "s3cret",
        },
    )
    try:
        async with Client(redis_url) as client:
            result = await client.calls.call("shout", {"text": "hi"}, timeout_s=60)
        assert not result.is_error, result
        assert result.output == {"pushed": "HI"}
        pushed = json.loads(receiver.wait_for(2)[-1][1])
        assert pushed["call"]["call_id"] == result.call_id
        assert pushed["call"]["input"] == {"text": "hi"}
    finally:
        server.stop()
        receiver.close()
