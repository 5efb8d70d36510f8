"""A forwarded call leased by a remote service holds its run's concurrency slot, as a
worker's claim does, over a real `agentq serve`, worker and redis-server: with a key of
max 1, a second run's call is not leasable while the first run's call is leased, and is
once the first call's result is in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.infra import WorkerProcess
from tests.support.remote_tools import remote_tools_file
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

ENDED = ("succeeded", "failed", "cancelled")
KEYED_SHOUT = {
    **scripted(
        calls(("shout", {"text": "hi"})),
        {"text": "done"},
        tools=[{"type": "remote", "name": "shout"}],
    ),
    "concurrency": {"key": "user-1", "max": 1},
}


@pytest.fixture
def remote_server(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(redis_url, env={"AGENTQ_REMOTE_TOOLS": remote_tools_file()})
    yield process
    process.stop()


def lease(
    server: ServeProcess, max_calls: int, wait_s: float, lease_s: float = 60
) -> list[dict[str, Any]]:
    response = httpx.post(
        f"{server.url}/v1/queues/node-tools/lease",
        json={"max": max_calls, "wait_s": wait_s, "lease_s": lease_s},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    leased: list[dict[str, Any]] = response.json()["calls"]
    return leased


def answer(server: ServeProcess, leased: dict[str, Any]) -> None:
    url = f"{server.url}/v1/leases/{leased['lease']['id']}/result"
    response = httpx.post(url, json={"output": "HI"}, timeout=30)
    assert response.status_code == 200, response.text


def remote_queue(server: ServeProcess) -> dict[str, Any]:
    queues = httpx.get(f"{server.url}/v1/queues", params={"queue": "node-tools"}, timeout=30)
    figures: dict[str, Any] = queues.json()["queues"]["node-tools"]
    return figures


def queued_calls(server: ServeProcess) -> int:
    ready: int = remote_queue(server)["ready"]
    return ready


def ended(server: ServeProcess, run_id: str) -> str:
    """The run's status once it ended."""

    def status() -> str:
        url = f"{server.url}/v1/runs/{run_id}"
        return str(httpx.get(url, params={"wait": 5}, timeout=30).json()["status"])

    return eventually(status, f"run {run_id} to end", 60, until=lambda s: s in ENDED)


def two_queued_calls(server: ServeProcess) -> list[str]:
    """Two runs of the key, each with its call waiting on the remote queue (a queued call
    holds no slot, so each run's model step ran in turn); their ids."""
    runs = []
    for _ in range(2):
        created = httpx.post(f"{server.url}/v1/runs", json=KEYED_SHOUT, timeout=30)
        assert created.status_code == 201, created.text
        runs.append(created.json()["id"])
    eventually(lambda: queued_calls(server), "both calls to be queued", until=lambda n: n == 2)
    return runs


def test_a_leased_call_holds_its_keys_slot_until_its_result(
    remote_server: ServeProcess,
) -> None:
    runs = two_queued_calls(remote_server)

    first = lease(remote_server, 2, 30)
    assert len(first) == 1, first  # the key's one slot is the leased call's
    assert lease(remote_server, 2, 0) == []  # still held while the lease is out
    # The held call is no work a pool could take: held, not ready, not in the depth.
    figures = remote_queue(remote_server)
    assert (figures["ready"], figures["held"], figures["running"]) == (0, 1, 1)
    assert figures["depth"] == 1
    answer(remote_server, first[0])

    second = lease(remote_server, 1, 30)
    assert [c["call"]["run_id"] for c in second] != [first[0]["call"]["run_id"]]
    answer(remote_server, second[0])
    for run_id in runs:
        assert ended(remote_server, run_id) == "succeeded"


def test_a_lapsed_lease_gives_its_keys_slot_back(remote_server: ServeProcess) -> None:
    """A lease not renewed lapses: a reaper re-delivers its call and frees the slot, and
    again one call (either run's) is leasable, the other held."""
    runs = two_queued_calls(remote_server)
    assert len(lease(remote_server, 2, 30, lease_s=1)) == 1  # never renewed
    (taken,) = lease(remote_server, 2, 60)  # once the lapsed lease was reaped
    figures = remote_queue(remote_server)
    assert (figures["ready"], figures["held"], figures["running"]) == (0, 1, 1)
    answer(remote_server, taken)
    (last,) = lease(remote_server, 1, 60)
    assert last["call"]["run_id"] != taken["call"]["run_id"]
    answer(remote_server, last)
    for run_id in runs:
        assert ended(remote_server, run_id) == "succeeded"
