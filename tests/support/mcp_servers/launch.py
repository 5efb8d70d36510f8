"""Starting MCP servers for tests: ours (Python SDK), mcp-server-time, server-everything.

Third-party servers come from `.ci/mcp-setup`. When one is missing the test
fails under CI (`CI=true`) and is skipped elsewhere, naming the script.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import pytest

from agentq.orchestrator.tools import ToolDef
from agentq.workers.tools.context import ToolContext
from tests.support.waiting import eventually_async

HERE = Path(__file__).resolve().parent
TEST_SERVER = HERE / "agentq_test_server.py"
NODE_DIR = HERE.parent / "node"
EVERYTHING_ENTRY = (
    NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
START_TIMEOUT_S = 30.0


def require(found: object, what: str) -> None:
    """Fail under CI, skip elsewhere, when a third-party server is not installed."""
    if found:
        return
    message = f"{what} is not installed; run .ci/mcp-setup"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def everything_entry() -> Path:
    require(EVERYTHING_ENTRY.is_file() and shutil.which("node"), "server-everything (npm)")
    return EVERYTHING_ENTRY


def time_server_command() -> str:
    found = shutil.which("mcp-server-time")
    require(found, "mcp-server-time (PyPI)")
    assert found is not None
    return found


def own_server_stdio(**extra: Any) -> dict[str, Any]:
    """The config entry that starts our test server over stdio."""
    return {"command": sys.executable, "args": [str(TEST_SERVER), "stdio"], **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def http_process(
    argv: list[str], port: int, env: dict[str, str] | None = None
) -> AsyncIterator[None]:
    """Run a server process until its port accepts connections; stop it after."""
    # stderr goes to a file: a pipe nobody drains would block a chatty server.
    with tempfile.TemporaryFile() as errors:
        process = await asyncio.create_subprocess_exec(
            *argv,
            env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            await _wait_for_port(port, process, errors)
            yield
        finally:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 10)
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def _wait_for_port(port: int, process: asyncio.subprocess.Process, errors: IO[bytes]) -> None:
    async def accepting() -> bool:
        if process.returncode is not None:
            errors.seek(0)
            tail = errors.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"server exited with {process.returncode}: {tail}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        await writer.wait_closed()
        return True

    await eventually_async(accepting, f"the server to listen on port {port}", START_TIMEOUT_S)


@contextlib.asynccontextmanager
async def own_server_http(transport: str, *extra: str) -> AsyncIterator[str]:
    """Our test server over HTTP on a free loopback port; yields its URL."""
    port = free_port()
    argv = [sys.executable, str(TEST_SERVER), transport, "--port", str(port), *extra]
    async with http_process(argv, port):
        path = "/sse" if transport == "sse" else "/mcp"
        yield f"http://127.0.0.1:{port}{path}"


@contextlib.asynccontextmanager
async def everything_http() -> AsyncIterator[str]:
    entry = everything_entry()
    port = free_port()
    async with http_process(["node", str(entry), "streamableHttp"], port, {"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


def mcp_tool(server: str, tool: str, *, timeout_s: float = 30.0) -> ToolDef:
    return ToolDef(
        name=tool,
        kind="mcp",
        queue="tools",
        timeout_s=timeout_s,
        config={"server": server, "tool": tool},
    )


class Recorder:
    """Collects what a call reports through its ToolContext."""

    def __init__(self) -> None:
        self.progress: list[Any] = []
        self.elicited: list[tuple[str, dict[str, Any]]] = []

    async def on_progress(self, value: Any) -> None:
        self.progress.append(value)


def call_context(
    tool: ToolDef,
    recorder: Recorder | None = None,
    *,
    answer: dict[str, Any] | None = None,
    forward: bool = False,
    call_id: str = "call-1",
) -> ToolContext:
    """A ToolContext for one call; with `forward`, elicitations get `answer`."""
    recorder = recorder or Recorder()
    elicit: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]] | None = None
    if forward:

        async def elicit_fn(message: str, schema: dict[str, Any]) -> dict[str, Any] | None:
            assert recorder is not None
            recorder.elicited.append((message, schema))
            return answer

        elicit = elicit_fn
    return ToolContext(
        run_id="run-1",
        step=0,
        call_id=call_id,
        tool=tool,
        attempt=1,
        deadline_at=time.time() + tool.timeout_s,
        progress=recorder.on_progress,
        elicit=elicit,
    )
