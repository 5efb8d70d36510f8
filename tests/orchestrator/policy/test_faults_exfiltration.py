"""Issue 14, item 1: a run spec cannot make a worker send its secrets anywhere.

A real redis-server and a real `agentq worker` process whose environment holds
OPENAI_API_KEY, ANTHROPIC_API_KEY and an unrelated DB_PASSWORD (canaries), and
a dummy HTTP server on loopback that records whatever reaches it. Specs that
point the model at the dummy server, or name DB_PASSWORD as their key, are
refused at submit through the CLI (exit 2, one line naming the field) and the
Python API (SpecError); the dummy server receives nothing. A spec let through
by a permissive submitter is refused again by the worker, before any request.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from tests.support.infra import RedisServer, WorkerProcess, run_cli

pytestmark = pytest.mark.faults

CANARIES = {
    "OPENAI_API_KEY": "sk-openai-CANARY-7c1d9e0f2a4b",
    "ANTHROPIC_API_KEY": "sk-ant-CANARY-5e8f1a2b3c4d",
    "DB_PASSWORD": "db-pass-CANARY-9f8e7d6c5b4a",
}


class Dummy:
    """An HTTP server on loopback that records every request and answers 400."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace")
                seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(400)
                self.send_header("content-type", "application/json")
                payload = b'{"error": {"message": "dummy"}}'
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _record

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def dummy() -> Iterator[Dummy]:
    server = Dummy()
    yield server
    server.close()


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    server = RedisServer()
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def worker(redis_url: str, dummy: Dummy) -> Iterator[WorkerProcess]:
    # The deployment allows specs to reach the dummy's URL (so that the worker's own check
    # is what stops a key from going there), and no key variable at all.
    env = {**CANARIES, "AGENTQ_ALLOW_SPEC_ENDPOINTS": dummy.base_url}
    process = WorkerProcess(redis_url, env=env)
    deadline = time.monotonic() + 30
    while "agentq worker" not in process.log():
        assert process.proc.poll() is None, process.log()
        assert time.monotonic() < deadline, process.log()
        time.sleep(0.05)
    yield process
    process.stop()


def attempts(dummy_url: str) -> list[tuple[dict[str, Any], str]]:
    """(model, the field the refusal must name)."""
    return [
        ({"provider": "openai", "name": "gpt-4o", "base_url": dummy_url}, "model.base_url"),
        ({"provider": "anthropic", "name": "claude", "base_url": dummy_url}, "model.base_url"),
        (
            {
                "provider": "openai",
                "name": "gpt-4o",
                "base_url": dummy_url,
                "api_key_env": "DB_PASSWORD",
            },
            "model.base_url",
        ),
        (
            {"provider": "openai", "name": "gpt-4o", "api_key_env": "DB_PASSWORD"},
            "model.api_key_env",
        ),
        (
            {"provider": "openai", "name": "m", "base_url": "http://169.254.169.254/latest"},
            "model.base_url",
        ),
    ]


def spec(model: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "prompt": "tell me your secrets"}


def assert_nothing_leaked(dummy: Dummy, redis_url: str) -> None:
    import redis

    assert dummy.requests == []
    client = redis.Redis.from_url(redis_url)
    for key in cast(list[bytes], client.keys("*")):
        dump = cast(bytes | None, client.dump(key)) or b""
        for secret in CANARIES.values():
            assert secret.encode() not in dump, key


def test_the_cli_refuses_every_attempt_at_submit(
    redis_url: str, worker: WorkerProcess, dummy: Dummy, tmp_path: Path
) -> None:
    for i, (model, field) in enumerate(attempts(dummy.base_url)):
        path = tmp_path / f"spec{i}.json"
        path.write_text(json.dumps(spec(model)))
        done = run_cli("submit", str(path), redis_url=redis_url)
        assert done.returncode == 2, (model, done.stdout, done.stderr)
        assert done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"agentq: {field}: "), lines[0]
        for secret in CANARIES.values():
            assert secret not in done.stderr
    assert_nothing_leaked(dummy, redis_url)


async def test_the_python_api_refuses_every_attempt_at_submit(
    redis_url: str, worker: WorkerProcess, dummy: Dummy
) -> None:
    async with Client(redis_url, settings=Settings()) as client:
        for model, field in attempts(dummy.base_url):
            with pytest.raises(SpecError, match=rf"^{field}: "):
                await client.runs.submit(spec(model))
    assert_nothing_leaked(dummy, redis_url)


async def test_the_worker_checks_again_before_any_request(
    redis_url: str, worker: WorkerProcess, dummy: Dummy
) -> None:
    """A submitter configured more loosely than the worker (here: it lets specs name
    DB_PASSWORD) gets the run created; the worker refuses to send the variable."""
    loose = Settings(allow_spec_endpoints=dummy.base_url, allow_spec_key_envs="DB_PASSWORD")
    model = {"provider": "openai", "name": "m", "base_url": dummy.base_url}
    async with Client(redis_url, settings=loose) as client:
        run_id = await client.runs.submit(spec({**model, "api_key_env": "DB_PASSWORD"}))
        result = await client.runs.wait(run_id, timeout_s=60)
    assert result.status == "failed"
    assert result.error is not None
    assert "model.api_key_env: 'DB_PASSWORD' is not a variable" in result.error.message
    assert_nothing_leaked(dummy, redis_url)


async def test_an_allowed_url_gets_the_request_but_no_key(
    redis_url: str, worker: WorkerProcess, dummy: Dummy
) -> None:
    """The control: the dummy does receive what the deployment allows, a request to the
    allowed URL, and none of the worker's keys comes with it."""
    allowed = Settings(allow_spec_endpoints=dummy.base_url)
    model = {"provider": "openai", "name": "m", "base_url": dummy.base_url}
    async with Client(redis_url, settings=allowed) as client:
        result = await client.runs.wait(await client.runs.submit(spec(model)), timeout_s=60)
    assert result.status == "failed"  # the dummy answers 400
    assert len(dummy.requests) == 1
    seen = json.dumps(dummy.requests)
    assert "authorization" not in {k.lower() for k in dummy.requests[0]["headers"]}
    for secret in CANARIES.values():
        assert secret not in seen
    dummy.requests.clear()
