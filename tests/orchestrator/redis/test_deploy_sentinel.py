"""A Sentinel URL reaches the master a real redis-sentinel names."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agentq.orchestrator.redis.connect import connect
from tests.support.infra import RedisServer, free_port, listening, missing
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[tuple[RedisServer, int]]:
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server", "install it with `apt-get install -y redis-server`")
    master = RedisServer()
    port = free_port()
    config = tmp_path / "sentinel.conf"  # sentinel rewrites its config: a file of its own
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor agentq 127.0.0.1 {master.port} 1\n"
    )
    proc = subprocess.Popen(
        [str(binary), str(config), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(lambda: listening(port), "redis-sentinel to listen", 10, 0.02)
        yield master, port
    finally:
        proc.terminate()
        proc.wait(10)
        master.stop()


async def test_a_sentinel_url_reaches_the_master(sentinel: tuple[RedisServer, int]) -> None:
    master, port = sentinel
    client = connect(f"redis+sentinel://127.0.0.1:{port}/agentq/3")
    try:
        await client.set("agentq:sentinel-check", "reached")
    finally:
        await client.aclose()
    direct = redis.Redis(port=master.port, db=3)
    assert direct.get("agentq:sentinel-check") == b"reached"
