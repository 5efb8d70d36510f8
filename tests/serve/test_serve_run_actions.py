"""A run's actions over real HTTP (`agentq serve`, `agentq worker`, a real redis-server):
cancel, retry, fork at a step, replay; each reaches the caller's own runs only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme-actions", "globex": "key-globex-actions"}
ADD = scripted(
    calls(("add", {"a": 1, "b": 2})),
    {"text": "1+2=3"},
    tools=["add"],
    system="be exact",
    steps=[{"when": {"step": 1}, "system": "answer now"}],
)


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(f"{hash_key(key)} {tenant}" for tenant, key in KEYS.items())
    process = ServeProcess(
        redis_url, env={"AGENTQ_API_KEYS": lines, "AGENTQ_SERVE_MAX_SPEC_BYTES": "4000"}
    )
    yield process
    process.stop()


def call(server: ServeProcess, who: str, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=60, **kw)


def finished(server: ServeProcess, run_id: str) -> dict[str, Any]:
    result: dict[str, Any] = call(server, "acme", "GET", f"/v1/runs/{run_id}?wait=30").json()
    assert result["status"] in {"succeeded", "failed", "cancelled"}, result
    return result


def test_retry_fork_and_replay_a_finished_run(keyed: ServeProcess) -> None:
    run_id = call(keyed, "acme", "POST", "/v1/runs", json=ADD).json()["id"]
    original = finished(keyed, run_id)
    assert original["status"] == "succeeded"

    retried = call(keyed, "acme", "POST", f"/v1/runs/{run_id}/retry")
    assert retried.status_code == 201, retried.text
    assert retried.json()["origin"] == run_id
    again = finished(keyed, retried.json()["id"])
    assert (again["status"], again["text"]) == ("succeeded", "1+2=3")
    assert again["origin"] == {"run_id": run_id, "step": 0}

    patch = {"model": {"script": [{"text": "unused"}, {"text": "forked at 1"}]}}
    forked = call(
        keyed, "acme", "POST", f"/v1/runs/{run_id}/fork", json={"at_step": 1, "patch": patch}
    )
    assert forked.status_code == 201, forked.text
    fork = finished(keyed, forked.json()["id"])
    assert (fork["status"], fork["text"]) == ("succeeded", "forked at 1")
    assert fork["origin"] == {"run_id": run_id, "step": 1}
    # Step 0 is the original's, copied: its call's result was not asked for again.
    assert fork["steps"][0]["tool_results"] == original["steps"][0]["tool_results"]

    big = {"at_step": 1, "patch": {"system": "x" * 5000}}
    too_big = call(keyed, "acme", "POST", f"/v1/runs/{run_id}/fork", json=big)
    assert too_big.status_code == 413
    assert too_big.json()["error"]["limit"] == "max_spec_bytes"
    past = call(keyed, "acme", "POST", f"/v1/runs/{run_id}/fork", json={"at_step": 9})
    assert past.status_code == 422
    assert "between 0 and 1" in past.json()["error"]["message"]

    same = call(keyed, "acme", "POST", f"/v1/runs/{run_id}/replay")
    assert same.status_code == 200, same.text
    assert same.json() == {"run_id": run_id, "steps": 2, "divergences": [], "diverged": False}
    what_if = call(
        keyed, "acme", "POST", f"/v1/runs/{run_id}/replay", json={"patch": {"system": "be vague"}}
    ).json()
    assert what_if["diverged"] is True
    assert [(d["step"], d["what"]) for d in what_if["divergences"]] == [(0, "system")]


def test_cancel_a_parked_run_and_openapi_lists_the_actions(keyed: ServeProcess) -> None:
    spec = scripted(calls(("add", {"a": 1, "b": 1})), {"text": "never"}, tools=["add"])
    spec["tools"][0]["needs_approval"] = True
    run_id = call(keyed, "acme", "POST", "/v1/runs", json=spec).json()["id"]
    cancelled = call(keyed, "acme", "POST", f"/v1/runs/{run_id}/cancel", json={"reason": "enough"})
    assert cancelled.json() == {"id": run_id, "outcome": "cancelled"}
    assert finished(keyed, run_id)["status"] == "cancelled"

    paths = call(keyed, "acme", "GET", "/openapi.json").json()["paths"]
    for action in ("cancel", "retry", "fork", "replay"):
        assert "post" in paths[f"/v1/runs/{{run_id}}/{action}"], action


def test_another_tenants_key_reaches_none_of_the_actions(keyed: ServeProcess) -> None:
    """Adversarial: globex names acme's run in every action; each answers 404 (as for a
    run that does not exist), and acme's run is left as it was, with no run started."""
    spec = scripted(calls(("add", {"a": 1, "b": 1})), {"text": "never"}, tools=["add"])
    spec["tools"][0]["needs_approval"] = True
    run_id = call(keyed, "acme", "POST", "/v1/runs", json=spec).json()["id"]
    done = call(keyed, "acme", "POST", "/v1/runs", json=ADD).json()["id"]
    finished(keyed, done)

    def status() -> str:
        return str(call(keyed, "acme", "GET", f"/v1/runs/{run_id}").json()["status"])

    eventually(status, "the run parks its call", until=lambda s: s == "awaiting")
    for target in (run_id, done):
        for action, body in [
            ("cancel", {"reason": "mine now"}),
            ("retry", None),
            ("fork", {"at_step": 0, "patch": {"system": "leak"}}),
            ("replay", {"patch": None}),
        ]:
            answer = call(keyed, "globex", "POST", f"/v1/runs/{target}/{action}", json=body)
            assert answer.status_code == 404, (action, answer.text)
            assert answer.json()["error"]["type"] == "not_found"
    assert call(keyed, "globex", "GET", "/v1/runs").json()["runs"] == []
    assert status() == "awaiting"
    assert [r["id"] for r in call(keyed, "acme", "GET", "/v1/runs").json()["runs"]] == [
        done,
        run_id,
    ]
