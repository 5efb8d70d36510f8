"""The test servers start on a port chosen before they bind it: another process can take
the port in between. A server then exits, and what answers on its port is the other
process: the harness must notice, and start ours on another port."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.support import infra, serve
from tests.support.infra import RedisServer, ServerExited, listens

pytestmark = pytest.mark.integration


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port another process (this one) listens on."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    yield int(holder.getsockname()[1])
    holder.close()


def test_listens_tells_whose_socket_a_port_is(taken: int) -> None:
    assert listens(os.getpid(), taken)
    server = RedisServer()
    try:
        assert listens(server.proc.pid, server.port)
        assert not listens(server.proc.pid, taken)
        assert not listens(os.getpid(), server.port)
    finally:
        server.stop()


def test_a_redis_server_whose_port_was_taken_starts_on_another(
    taken: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = iter([taken])
    monkeypatch.setattr(infra, "free_port", lambda: next(chosen, None) or infra.free_ports(1)[0])
    server = RedisServer()
    try:
        assert server.port != taken
        info: Any = redis.Redis(port=server.port).info("server")  # redis-py types it loosely
        assert info["process_id"] == server.proc.pid
    finally:
        server.stop()


def test_a_port_given_explicitly_is_not_replaced(taken: int) -> None:
    with pytest.raises(ServerExited, match=str(taken)):
        RedisServer(port=taken)


def test_agentq_serve_whose_port_was_taken_starts_on_another(
    taken: int, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = iter([taken])
    monkeypatch.setattr(serve, "free_port", lambda: next(chosen, None) or infra.free_ports(1)[0])
    process = serve.ServeProcess(redis_url)
    try:
        assert process.port != taken
        assert listens(process.proc.pid, process.port)
    finally:
        process.stop()
