"""`agentq serve` refuses to start beside a fleet of another run-state layout
(`serve/preflight.py`, `fleet/layout_guard.check`), against a real redis-server and a real
`agentq serve` process: one line naming both layouts, exit code 3, nothing listening. A
server claims no layout, and a Redis that does not answer yet does not stop it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.fleet import listings
from agentq.orchestrator.fleet.layout import STATE_LAYOUT, TEST_OVERRIDE
from agentq.orchestrator.fleet.layout_guard import LAYOUT, UPGRADE_DOC
from agentq.serve.preflight import check_layout
from tests.support.infra import REPO, free_port
from tests.support.serve import ServeProcess
from tests.workers.worker.test_integration_layout_epoch import beat_as_before_layouts

pytestmark = pytest.mark.integration

EXIT_INFRASTRUCTURE = 3
NEWER = STATE_LAYOUT + 1


def exits_3(redis_url: str, environ: dict[str, str]) -> str:
    """An `agentq serve` that does not start: exit code 3, and its one line."""
    done = subprocess.run(
        [sys.executable, "-m", "agentq", "serve", "--redis", redis_url, "--port", str(free_port())],
        env={**environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == EXIT_INFRASTRUCTURE, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("agentq: ")]
    return line


def refused(redis_url: str, env: dict[str, str] | None = None) -> str:
    """`agentq serve`'s exit (code 3) and its one line of refusal."""
    line = exits_3(redis_url, {**os.environ, **(env or {})})
    assert line.startswith("agentq: this server reads and writes the run state in layout ")
    assert "Drain the old pool first" in line
    assert UPGRADE_DOC in line
    return line


def test_a_server_refuses_a_fleet_of_an_earlier_release(redis_url: str) -> None:
    admin = redis.Redis.from_url(redis_url)
    beat_as_before_layouts(admin, "old-worker-1")
    line = refused(redis_url)
    assert f"layout {STATE_LAYOUT}, but live workers (old-worker-1 on old-host)" in line
    assert "use layout 0 (a release from before layouts were recorded)" in line
    assert admin.get(LAYOUT) is None  # a server claims nothing


def test_a_server_of_another_release_refuses_the_fleets_layout_key(redis_url: str) -> None:
    # Workers of this release started a moment ago: the key is theirs, no record yet.
    admin = redis.Redis.from_url(redis_url)
    admin.set(LAYOUT, str(STATE_LAYOUT), px=int(listings.WORKER_STALE_S * 1000))
    line = refused(redis_url, env={TEST_OVERRIDE: str(NEWER)})
    assert f"layout {NEWER}, but workers that started or beat within" in line
    assert f"use layout {STATE_LAYOUT}:" in line
    assert admin.get(LAYOUT) == str(STATE_LAYOUT).encode()

    # The fleet's own release starts, and claims nothing either.
    server = ServeProcess(redis_url)
    try:
        assert "layout was not checked" not in server.log()
    finally:
        server.stop()
    assert admin.get(LAYOUT) == str(STATE_LAYOUT).encode()


def test_a_redis_that_does_not_answer_leaves_the_layout_unchecked() -> None:
    """With its token secret given, a server starts before Redis answers (as it always
    did) and says what it could not check; without, it cannot start, and says so in one
    line rather than the startup's traceback."""
    silent = f"redis://127.0.0.1:{free_port()}/0"
    server = ServeProcess(silent, env={"AGENTQ_TOKEN_SECRET": "s" * 32})
    try:
        assert "the fleet's state layout was not checked" in server.log()
        assert "Redis did not answer (Error 111 connecting" in server.log()
    finally:
        server.stop()

    line = exits_3(silent, {k: v for k, v in os.environ.items() if k != "AGENTQ_TOKEN_SECRET"})
    assert line.startswith("agentq: cannot reach Redis: Error 111 connecting")
    assert line.endswith("with $AGENTQ_TOKEN_SECRET set it starts before Redis answers)")


async def test_the_check_says_why_it_was_not_made() -> None:
    why = await check_layout(f"redis://127.0.0.1:{free_port()}/0", Settings())
    assert why is not None
    assert why.startswith("Error 111 connecting")
