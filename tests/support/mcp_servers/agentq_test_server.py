"""An MCP server for agentq's tests, written with the official Python SDK.

Run: `python agentq_test_server.py stdio` or
`python agentq_test_server.py streamable-http --port P` (serves `/mcp`) or
`python agentq_test_server.py sse --port P` (serves `/sse`).
The tools cover what the MCP executor must handle: progress, media, errors,
elicitation, sampling, slow calls for cancellation and a tool list that changes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import urllib.parse
from typing import Annotated, Any

import uvicorn
from mcp.server.mcpserver import (
    Context,
    Elicit,
    ElicitationResult,
    Image,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    AudioContent,
    CreateMessageResult,
    EmbeddedResource,
    ResourceLink,
    SamplingMessage,
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
STATS: dict[str, int] = {
    "cancelled": 0,
    "calls": 0,
    "tokens_issued": 0,
    "active": 0,
    "max_active": 0,
}


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return the text unchanged."""
    STATS["calls"] += 1
    return text


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers; the result is structured."""
    return {"sum": a + b}


@server.tool(structured_output=False)
async def count(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted {steps}"


@server.tool()
def tiny_image() -> Image:
    """A 1x1 PNG."""
    return Image(data=TINY_PNG, format="png")


@server.tool(structured_output=False)
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


@server.tool(structured_output=False)
def fail(message: str) -> str:
    """Always fails with the given message (an `isError` result)."""
    raise ToolError(message)


class Person(BaseModel):
    name: str = Field(default="Ada", description="Your name")
    age: int = Field(default=36)


def _ask_person() -> Elicit[Person]:
    return Elicit("Who are you?", Person)


@server.tool(structured_output=False)
def greet(answer: Annotated[ElicitationResult[Person], Resolve(_ask_person)]) -> str:
    """Asks the client who it is, through elicitation."""
    if answer.action == "accept":
        return f"hello {answer.data.name} ({answer.data.age})"
    return f"no answer: {answer.action}"


SUMMARY_SYSTEM = "You summarize text in one line."


def _ask_for_summary(text: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
        max_tokens=50,
        system_prompt=SUMMARY_SYSTEM,
        temperature=0.2,
        stop_sequences=["\n\n"],
    )


@server.tool(structured_output=False)
def summarize(text: str, answer: Annotated[CreateMessageResult, Resolve(_ask_for_summary)]) -> str:
    """Asks the client's model for a summary, through sampling."""
    content = answer.content
    said = content.text if isinstance(content, TextContent) else f"[{content.type}]"
    return f"{answer.model} ({answer.stop_reason}): {said}"


@server.tool(structured_output=False)
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep; reports progress 0 once it runs, counts cancellations and overlap."""
    STATS["active"] += 1
    STATS["max_active"] = max(STATS["max_active"], STATS["active"])
    try:
        await ctx.report_progress(0, 1, "started")
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        STATS["cancelled"] += 1
        raise
    finally:
        STATS["active"] -= 1
    return "slept"


@server.tool()
def whoami(ctx: Context) -> dict[str, str]:
    """How the client introduced itself."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return {
        "name": info.name if info else "",
        "version": info.version if info else "",
        "protocol": ctx.protocol_version or "",
    }


@server.tool()
def call_meta(ctx: Context) -> dict[str, Any]:
    """The request's `_meta`: what the client said about the call it makes."""
    return dict(ctx.request_context.meta or {})


@server.tool()
def die() -> str:
    """Exit the server process at once, as a crash would."""
    os._exit(3)


@server.tool(structured_output=False)
async def die_soon() -> str:
    """Exit the process shortly after answering, as a crash while idle would."""
    asyncio.get_running_loop().call_later(0.2, os._exit, 3)
    return "dying"


@server.tool()
def stats() -> dict[str, int]:
    """What this server process has observed."""
    return dict(STATS)


@server.tool(structured_output=False)
async def grow(name: str, ctx: Context) -> str:
    """Add a tool named `name` and tell the client the list changed."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"added by grow({name})", structured_output=False)
    await ctx.notify_tools_changed()
    if ctx.session is not None:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


def _guarded(app: Any, static_token: str | None, client: tuple[str, str] | None) -> Any:
    """Wrap the HTTP app: `/mcp` needs a bearer token; `/token` issues them."""
    valid = {static_token} if static_token else set()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if scope["path"] == "/token" and client is not None:
            await _issue_token(scope, receive, send, client, valid)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode()
        if not given.startswith("Bearer ") or given[len("Bearer ") :] not in valid:
            STATS["rejected"] = STATS.get("rejected", 0) + 1
            await _respond(send, 401, {"error": "invalid_token"})
            return
        await app(scope, receive, send)

    return guarded


async def _issue_token(
    scope: Any, receive: Any, send: Any, client: tuple[str, str], valid: set[str]
) -> None:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    form = dict(urllib.parse.parse_qsl(body.decode()))
    if (
        form.get("grant_type") != "client_credentials"
        or (
            form.get("client_id"),
            form.get("client_secret"),
        )
        != client
    ):
        await _respond(send, 401, {"error": "invalid_client"})
        return
    STATS["tokens_issued"] = STATS.get("tokens_issued", 0) + 1
    token = f"issued-{STATS['tokens_issued']}"
    valid.add(token)
    await _respond(send, 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600})


async def _respond(send: Any, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "streamable-http", "sse"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--static-token", help="require this bearer token over HTTP")
    parser.add_argument("--client-id", help="issue tokens at /token to this client")
    parser.add_argument("--client-secret")
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
        return
    app = server.sse_app() if args.transport == "sse" else server.streamable_http_app()
    client = (args.client_id, args.client_secret) if args.client_id else None
    if args.static_token or client:
        app = _guarded(app, args.static_token, client)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
