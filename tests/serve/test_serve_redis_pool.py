"""A request that finds every Redis connection of `agentq serve` busy is told so.

A real redis-server and a real `agentq serve` with two connections: Redis pauses its
clients (`CLIENT PAUSE`: it answers later, it is not gone), two requests hold both
connections, and the requests that wait their turn longer than
`AGENTQ_SERVE_REDIS_WAIT_S` get `429 rate_limited` naming `redis_connections`, with
Retry-After, never `503 "cannot reach Redis"`; once Redis answers, so does every other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.support.infra import RedisServer
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.integration

CONNECTIONS = 2
REQUESTS = 6
PAUSE_MS = 4000  # well past the wait below, well within the connect and socket timeouts


@pytest.fixture
def paused_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


def test_a_request_past_every_busy_connection_is_a_429_not_a_503(
    paused_redis: RedisServer,
) -> None:
    server = ServeProcess(
        paused_redis.url,
        env={
            "AGENTQ_SERVE_REDIS_CONNECTIONS": str(CONNECTIONS),
            "AGENTQ_SERVE_REDIS_WAIT_S": "0.5",
        },
    )
    try:

        async def at_once() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
                return list(
                    await asyncio.gather(*(http.get("/v1/runs/nope") for _ in range(REQUESTS)))
                )

        # Both connections made (connecting is not what is measured here).
        assert {r.status_code for r in asyncio.run(at_once())} == {404}
        redis.Redis.from_url(paused_redis.url).client_pause(PAUSE_MS, all=True)
        answers = asyncio.run(at_once())

        busy = [r for r in answers if r.status_code == 429]
        assert busy, [r.text for r in answers]
        for response in busy:
            error = response.json()["error"]
            assert error["type"] == "rate_limited", error
            assert error["limit"] == "redis_connections", error
            assert response.headers["retry-after"] == "1"
        assert {r.status_code for r in answers} <= {404, 429}, [r.text for r in answers]
        assert "Traceback" not in server.log()
    finally:
        server.stop()
