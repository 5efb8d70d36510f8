"""Liveness and readiness of a worker process over HTTP (`agentq worker --health-port P`).

    GET /livez   200 when the worker's event loop runs a callback within the timeout
    GET /readyz  200 when Redis answers PING, the executors and queue workers are
                 running and the tools are announced; 503 with the reasons otherwise

The server runs on a thread of its own: a worker whose event loop is blocked is
reported as not alive (503) rather than leaving the probe to hang on a server that
lives on the very loop it should judge.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from redis.asyncio import Redis

Check = Callable[[], Coroutine[Any, Any, list[str]]]


class Probed(Protocol):
    """What readiness reads of a WorkerRuntime."""

    redis: Redis | None
    announced: bool

    @property
    def running(self) -> bool: ...


def readiness_check(runtime: Probed, timeout_s: float = 2.0) -> Check:
    """The reasons `runtime` is not ready (none: ready)."""

    async def problems() -> list[str]:
        found: list[str] = []
        if not runtime.running:
            found.append("queue workers are not running")
        if not runtime.announced:
            found.append("tools are not announced yet")
        if runtime.redis is None:
            found.append("redis: not connected")
        else:
            try:
                await asyncio.wait_for(runtime.redis.ping(), timeout_s)
            except Exception as exc:
                found.append(f"redis: {type(exc).__name__}: {exc}".rstrip(": "))
        return found

    return problems


class HealthServer:
    def __init__(
        self,
        ready: Check,
        loop: asyncio.AbstractEventLoop,
        *,
        port: int,
        host: str = "0.0.0.0",
        timeout_s: float = 5.0,
    ) -> None:
        self.ready = ready
        self.loop = loop
        self.timeout_s = timeout_s
        self.server = ThreadingHTTPServer((host, port), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="agentq-health", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> HealthServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def live(self) -> list[str]:
        try:
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self.loop).result(self.timeout_s)
        except Exception as exc:
            return [f"event loop did not answer within {self.timeout_s:g} s ({type(exc).__name__})"]
        return []

    def readiness(self) -> list[str]:
        try:
            future = asyncio.run_coroutine_threadsafe(self.ready(), self.loop)
            problems: list[str] = future.result(self.timeout_s)
        except Exception as exc:
            return [f"readiness check did not finish within {self.timeout_s:g} s ({exc!r})"]
        return problems

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        probes: dict[str, Callable[[], list[str]]] = {
            "/livez": self.live,
            "/readyz": self.readiness,
        }

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass  # probes every few seconds would drown the worker's log

            def do_GET(self) -> None:
                probe = probes.get(self.path.split("?")[0])
                if probe is None:
                    self._reply(404, {"error": "not found; try /livez or /readyz"})
                    return
                problems = probe()
                status = 200 if not problems else 503
                self._reply(status, {"ok": not problems, "problems": problems})

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
