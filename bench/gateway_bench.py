"""The MCP gateway's overhead: one no-op `tools/call` through `agentq serve --mcp`,
against a direct `client.calls.call` and against a plain MCP server, measured in one run.

    python bench/gateway_bench.py [--calls 200] [--quick]

Starts its own redis-server, one `agentq worker` serving tests/support/call_tools.py's
`echo` tool, one `agentq serve --mcp`, and a plain MCP server (the SDK's low-level
server over Streamable HTTP, the same `echo` tool executed in its own process, no
queue). Then, CALLS sequential calls each (after 20 to warm up), the latency of:

1. direct: `await client.calls.call("echo", ...)` (enqueue, worker, write-once result);
2. gateway: the MCP SDK client's `tools/call` to `/mcp` (MCP over HTTP + the direct path);
3. plain MCP: the same client's `tools/call` to the plain server (MCP over HTTP alone).

Prints medians and p90s and the ratios gateway/direct and gateway/plain. Everything runs
on the same 2 cores; figures are for one machine at one moment, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import httpx2  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402
from tests.support.infra import (  # noqa: E402
    RedisServer,
    WorkerProcess,
    free_port,
    listens,
    wait_ready,
)
from tests.support.serve import ServeProcess  # noqa: E402
from tests.support.waiting import eventually  # noqa: E402

WARMUP = 20
ARGS = {"text": "x"}

PLAIN_SERVER = """
import sys, uvicorn, mcp_types as types
from mcp.server.lowlevel.server import Server

async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(
        name="echo", description="Returns its input text.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}})])

async def call_tool(ctx, params):
    text = (params.arguments or {}).get("text", "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

server = Server("plain", on_list_tools=list_tools, on_call_tool=call_tool)
uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]),
            log_level="warning")
"""


async def timed(call: Callable[[], Awaitable[object]], n: int) -> list[float]:
    for _ in range(WARMUP):
        await call()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return samples


async def over_mcp(url: str, n: int) -> list[float]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=60.0)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await timed(lambda: session.call_tool("echo", ARGS), n)


async def direct(redis_url: str, n: int) -> list[float]:
    async with Client(redis_url) as client:
        return await timed(lambda: client.calls.call("echo", ARGS), n)


def show(name: str, samples: list[float]) -> float:
    median = statistics.median(samples)
    p90 = sorted(samples)[int(0.9 * len(samples))]
    print(f"{name:<12} median {median * 1000:7.2f} ms   p90 {p90 * 1000:7.2f} ms")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="20 calls")
    args = parser.parse_args()
    n = 20 if args.quick else args.calls
    redis = RedisServer()
    worker = WorkerProcess(redis.url, "--tools", "tests/support/call_tools.py")
    port = free_port()
    plain = subprocess.Popen([sys.executable, "-c", PLAIN_SERVER, str(port)], cwd=_REPO)
    gateway: ServeProcess | None = None
    try:
        wait_ready(worker)
        gateway = ServeProcess(redis.url, "--mcp")
        eventually(lambda: listens(plain.pid, port), "the plain MCP server to start", 30)
        results = {
            "direct": show("direct", asyncio.run(direct(redis.url, n))),
            "gateway": show("gateway", asyncio.run(over_mcp(f"{gateway.url}/mcp", n))),
            "plain MCP": show(
                "plain MCP", asyncio.run(over_mcp(f"http://127.0.0.1:{port}/mcp", n))
            ),
        }
        print(f"gateway / direct call_tool: {results['gateway'] / results['direct']:.2f}x")
        print(f"gateway / plain MCP server: {results['gateway'] / results['plain MCP']:.2f}x")
    finally:
        if gateway is not None:
            gateway.stop()
        plain.terminate()
        plain.wait(10)
        worker.stop()
        redis.stop()


if __name__ == "__main__":
    main()
