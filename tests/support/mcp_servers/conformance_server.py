"""An upstream MCP server (Python SDK, stdio) with the tools of the MCP conformance suite's
server scenarios that ask the client something or log to it: elicitation, sampling and
logging. `agentq serve --mcp` serves them through a worker, so the suite checks that the
gateway forwards each request and notification to its own client.

Run: `python conformance_server.py` (stdio).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import SamplingMessage, TextContent

server = MCPServer("agentq-conformance", version="1.0.0")

SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}

SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> str:
    answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return f"action={answer.action}, content={json.dumps(answer.content)}"


@server.tool(structured_output=False)
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the client for a username and an email."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return "User response: " + await _elicit(ctx, message, schema)


@server.tool(structured_output=False)
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Asks the client a form whose fields all have defaults (SEP-1034)."""
    said = await _elicit(ctx, "Please review and update the form fields", SEP1034_SCHEMA)
    return "Elicitation completed: " + said


@server.tool(structured_output=False)
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks the client a form with every enum variant (SEP-1330)."""
    said = await _elicit(ctx, "Please select options from the enum fields", SEP1330_SCHEMA)
    return "Elicitation completed: " + said


@server.tool(structured_output=False)
async def test_tool_with_logging(ctx: Context) -> str:
    """Logs three messages at info level while it runs."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool(structured_output=False)
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model to answer the prompt."""
    answer = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = answer.content
    said = content.text if isinstance(content, TextContent) else f"[{content.type}]"
    return f"LLM response: {said}"


if __name__ == "__main__":
    server.run("stdio")
