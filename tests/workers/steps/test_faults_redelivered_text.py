"""Fault: a worker is SIGKILLed while its model step streams text. The step is
re-delivered and streams again; its `text-delta` events carry the attempt, so a
reader (and `agentq run`'s live view) keeps one copy, and the result's text is
one copy. Real redis-server, real worker processes, a real streaming HTTP server."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from rich.console import Console

from agentq.cli.render import ProgressPrinter
from agentq.orchestrator.client import Client
from tests.support.infra import RedisServer, WorkerProcess

pytestmark = pytest.mark.faults


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "x",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


class StallingModel:
    """The first request streams "Hello " and stalls; later ones stream the whole answer."""

    def __init__(self) -> None:
        self.requests = 0
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.requests += 1
                first = outer.requests == 1
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                pieces = [chunk({"role": "assistant", "content": "Hello "})]
                if not first:
                    pieces += [chunk({"content": "world"}), chunk({}, "stop"), b"data: [DONE]\n\n"]
                for piece in pieces:
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                if first:
                    outer.release.wait(60)  # the worker dies meanwhile
                    return
                self.wfile.write(b"0\r\n\r\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def model() -> Iterator[StallingModel]:
    fake = StallingModel()
    yield fake
    fake.close()


@pytest.fixture
def server() -> Iterator[RedisServer]:
    started = RedisServer()
    yield started
    started.stop()


async def test_a_redelivered_step_shows_its_text_once(
    server: RedisServer, model: StallingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow = {
        "AGENTQ_ALLOW_SPEC_ENDPOINTS": "http://127.0.0.1:",
        "AGENTQ_ALLOW_SPEC_KEY_ENVS": "OPENAI_API_KEY",
        "OPENAI_API_KEY": "sk-test",
    }
    for name, value in allow.items():
        monkeypatch.setenv(name, value)
    first = WorkerProcess(server.url, env=allow)
    spec = {
        "model": {"provider": "openai", "name": "m", "base_url": model.base_url},
        "prompt": "greet",
    }
    async with Client(server.url) as client:
        run_id = await client.runs.submit(spec)
        async for event in client.runs.events(run_id, follow=True):
            if event.type == "text-delta":
                break  # attempt 1 has streamed "Hello "
        first.kill()
        second = WorkerProcess(server.url, env=allow)
        try:
            result = await client.runs.wait(run_id, timeout_s=120)
        finally:
            second.stop()
        events = [e async for e in client.runs.events(run_id)]
    assert result.status == "succeeded", result.error
    assert result.text == "Hello world"
    deltas = [e.model_dump() for e in events if e.type == "text-delta"]
    assert {d["attempt"] for d in deltas} == {1, 2}
    latest = max(d["attempt"] for d in deltas)
    assert "".join(d["delta"] for d in deltas if d["attempt"] == latest) == "Hello world"

    out = io.StringIO()
    printer = ProgressPrinter(Console(file=out, soft_wrap=True))
    for event in events:
        printer.show(event)
    shown = out.getvalue()
    assert shown.count("Hello world") == 1
    assert "Hello Hello" not in shown
    assert "discarded" in shown
