"""pytest fixtures: a real redis-server for the session, a clean database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.support.infra import RedisServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A clean database on the session's real redis-server."""
    redis.Redis.from_url(redis_server.url).flushall()
    return redis_server.url
