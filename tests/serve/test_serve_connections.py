"""One tenant's followers cannot exhaust Redis's connections (issue 25, item 7).

A real redis-server with `maxclients 100`, a real `agentq serve` and real workers: one
tenant holds 2,000 waiters (`?wait=` and SSE streams) on its parked runs, and every other
door still answers: another tenant's submit and wait, a GET of a run, `/readyz`, the CLI's
submit and a new worker starting. Redis never refuses a connection; the tenant's next
waiter is a 429 naming its limit; once the runs end, every waiter gets its answer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from agentq.serve.auth import hash_key
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, run_cli, wait_ready
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.waiting import eventually, eventually_async

pytestmark = pytest.mark.integration

WAITERS = 2000
STREAMS = 400  # of them, SSE event streams; the others `?wait=` requests
RUNS = 20
KEYS = {
    "reader": "key-acme-reader",
    "acme": "key-acme",
    "globex": "key-globex",
    "ops": "key-ops",
}
PARKED = scripted(
    {"tool_calls": [{"name": "ask_user", "input": {"q": "name?"}, "id": "c1"}]},
    {"text": "done"},
    tools=[{"type": "client", "name": "ask_user"}],
)
HELLO = scripted({"text": "hello"})


@pytest.fixture
def small_redis() -> Iterator[RedisServer]:
    server = RedisServer(extra_args=["--maxclients", "100"])
    yield server
    server.stop()


@pytest.fixture
def fleet(small_redis: RedisServer) -> Iterator[tuple[ServeProcess, RedisServer]]:
    worker = WorkerProcess(small_redis.url, "--tools", TOOLS)
    wait_ready(worker)
    keys = "; ".join(
        [
            f"{hash_key(KEYS['reader'])} acme runs:read",
            f"{hash_key(KEYS['acme'])} acme",
            f"{hash_key(KEYS['globex'])} globex",
            f"{hash_key(KEYS['ops'])} ops metrics",
        ]
    )
    server = ServeProcess(
        small_redis.url,
        env={"AGENTQ_API_KEYS": keys, "AGENTQ_SERVE_STREAMS_PER_TENANT": str(WAITERS)},
    )
    yield server, small_redis
    server.stop()
    worker.stop()


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[who]}"}


def rejected(direct: redis.Redis) -> int:
    """The connections Redis refused (over `maxclients`) since it started."""
    stats: dict[str, Any] = direct.info("stats")  # type: ignore[assignment]
    return int(stats["rejected_connections"])


async def hold(port: int, path: str) -> tuple[int, bytes]:
    """One request on its own connection, read to its end: (status, raw response)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {KEYS['reader']}\r\nConnection: close\r\n\r\n"
    )
    writer.write(request.encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    return int(raw.split(b" ", 2)[1]), raw


def test_a_tenants_waiters_leave_every_other_door_open(
    fleet: tuple[ServeProcess, RedisServer],
) -> None:
    server, small_redis = fleet
    direct = redis.Redis.from_url(small_redis.url)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        runs = [
            http.post("/v1/runs", json=PARKED, headers=auth("acme")).json()["id"]
            for _ in range(RUNS)
        ]
        for run_id in runs:

            def parked(run_id: str = run_id) -> bool:
                run = http.get(f"/v1/runs/{run_id}", headers=auth("acme")).json()
                return bool(run["status"] == "awaiting")

            eventually(parked, "the run to park")

    async def scenario() -> list[tuple[int, bytes]]:
        waiters: list[asyncio.Task[tuple[int, bytes]]] = []
        for n in range(WAITERS):
            run_id = runs[n % RUNS]
            path = f"/v1/runs/{run_id}/events" if n < STREAMS else f"/v1/runs/{run_id}?wait=300"
            waiters.append(asyncio.create_task(hold(server.port, path)))
            if n % 100 == 99:
                await asyncio.sleep(0)  # let the connections open in steps

        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:

            async def all_held() -> bool:
                # Read from the server's own count: a probe sent before every waiter is
                # in would take the slot the last of them needs.
                for waiter in waiters:
                    if waiter.done():
                        raise AssertionError(f"a waiter ended early: {waiter.result()!r}")
                scraped = await http.get("/metrics", headers=auth("ops"))
                return f"agentq_streams_held {float(WAITERS)}" in scraped.text

            # 2,000 requests admitted on two shared cores can take longer than the usual
            # wait: this bounds how long to wait for them, it measures nothing.
            await eventually_async(all_held, "the tenant's waiters all held", timeout_s=120)
            response = await http.get(f"/v1/runs/{runs[0]}?wait=0.01", headers=auth("reader"))
            assert response.status_code == 429, response.text
            assert response.json()["error"]["limit"] == "streams_per_tenant"

            # Every other door answers meanwhile.
            assert (await http.get("/readyz")).status_code == 200
            mine = await http.get(f"/v1/runs/{runs[0]}", headers=auth("reader"))
            assert mine.json()["status"] == "awaiting"
            theirs = await http.post("/v1/runs", json=HELLO, headers=auth("globex"))
            assert theirs.status_code == 201, theirs.text
            done = await http.get(
                f"/v1/runs/{theirs.json()['id']}", params={"wait": 60}, headers=auth("globex")
            )
            assert done.json()["status"] == "succeeded", done.text
            cli = await asyncio.to_thread(
                run_cli, "submit", "-", redis_url=small_redis.url, input_text=json.dumps(HELLO)
            )
            assert cli.returncode == 0, cli.stderr
            late = await asyncio.to_thread(WorkerProcess, small_redis.url, "--tools", TOOLS)
            try:
                await asyncio.to_thread(wait_ready, late)
            finally:
                await asyncio.to_thread(late.stop)
            assert rejected(direct) == 0

            for run_id in runs:
                posted = await http.post(
                    f"/v1/runs/{run_id}/calls/c1/result",
                    json={"output": "Ada"},
                    headers=auth("acme"),
                )
                assert posted.status_code == 200, posted.text
        return list(await asyncio.gather(*waiters))

    answers = asyncio.run(scenario())
    assert [status for status, _ in answers] == [200] * WAITERS
    for n, (_, raw) in enumerate(answers):
        if n < STREAMS:
            assert b"event: finish" in raw, raw[-500:]
        else:
            assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["status"] == "succeeded"
    assert rejected(direct) == 0


def test_redis_trouble_is_a_typed_503_never_a_500(small_redis: RedisServer) -> None:
    server = ServeProcess(small_redis.url)
    try:
        small_redis.stop()
        for method, path in [
            ("GET", "/v1/runs"),
            ("POST", "/v1/runs"),
            ("GET", "/v1/runs/r1"),
            ("GET", "/v1/runs/r1?wait=1"),
            ("GET", "/v1/batches"),
            ("GET", "/v1/fleet"),
            ("GET", "/readyz"),
        ]:
            body = HELLO if method == "POST" else None
            response = httpx.request(method, f"{server.url}{path}", json=body, timeout=60)
            assert response.status_code == 503, (path, response.text)
            assert response.json()["error"]["type"] == "unavailable", (path, response.text)
        assert "Traceback" not in server.log()
    finally:
        server.stop()
