"""An MCP server for agentq's tests, written with the official Python SDK.

Run: `python agentq_test_server.py stdio` or
`python agentq_test_server.py streamable-http --port P` (serves `/mcp`) or
`python agentq_test_server.py sse --port P` (serves `/sse`).
The tools cover what the MCP executor must handle: progress, media, errors,
elicitation, slow calls for cancellation and a tool list that changes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
from typing import Annotated, Any

from mcp.server.mcpserver import (
    Context,
    Elicit,
    ElicitationResult,
    Image,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    AudioContent,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, Field

# A 1x1 transparent PNG.
TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("agentq-test", version="1.0.0")

# Server-side observations the tests read back through the `stats` tool.
STATS: dict[str, int] = {"cancelled": 0, "calls": 0}


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    STATS["calls"] += 1
    return text


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers; the result is structured."""
    return {"sum": a + b}


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted {steps}"


@server.tool()
def tiny_image() -> Image:
    """A 1x1 PNG."""
    return Image(data=TINY_PNG, format="png")


@server.tool()
def mixed() -> list[Any]:
    """Every kind of content block at once."""
    return [
        TextContent(type="text", text="hello"),
        Image(data=TINY_PNG, format="png").to_image_content(),
        AudioContent(type="audio", data=base64.b64encode(b"RIFF").decode(), mime_type="audio/wav"),
        ResourceLink(type="resource_link", uri="file:///tmp/a.txt", name="a.txt"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="file:///tmp/b.txt", text="inside", mime_type="text/plain"
            ),
        ),
    ]


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message (an `isError` result)."""
    raise ToolError(message)


class Person(BaseModel):
    name: str = Field(default="Ada", description="Your name")
    age: int = Field(default=36)


def _ask_person() -> Elicit[Person]:
    return Elicit("Who are you?", Person)


@server.tool()
def greet(answer: Annotated[ElicitationResult[Person], Resolve(_ask_person)]) -> str:
    """Asks the client who it is, through elicitation."""
    if answer.action == "accept":
        return f"hello {answer.data.name} ({answer.data.age})"
    return f"no answer: {answer.action}"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, counting the calls that were cancelled before finishing."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        STATS["cancelled"] += 1
        raise
    return "slept"


@server.tool()
def die() -> str:
    """Exit the server process at once, as a crash would."""
    os._exit(3)


@server.tool()
def stats() -> dict[str, int]:
    """What this server process has observed."""
    return dict(STATS)


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool named `name` and tell the client the list changed."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"added by grow({name})")
    await ctx.notify_tools_changed()
    if ctx.session is not None:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "streamable-http", "sse"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    elif args.transport == "sse":
        server.run("sse", host="127.0.0.1", port=args.port)
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
