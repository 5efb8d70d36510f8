"""Function tools named and shaped as the MCP conformance suite's server scenarios expect
(`@modelcontextprotocol/conformance server`), served through `agentq serve --mcp`."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from agentq.workers.tools.function_tools import tool
from tests.support.call_tools import TINY_PNG

# A WAV header with no samples, base64.
TINY_WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="


@tool
def test_simple_text() -> str:
    """Returns a simple text."""
    return "This is a simple text response for testing."


@tool
def test_image_content() -> dict[str, Any]:
    """Returns an image."""
    return {"content": [{"type": "media", "media_type": "image/png", "data": TINY_PNG}]}


@tool
def test_audio_content() -> dict[str, Any]:
    """Returns an audio clip."""
    return {"content": [{"type": "media", "media_type": "audio/wav", "data": TINY_WAV}]}


@tool
def test_embedded_resource() -> dict[str, Any]:
    """Returns an embedded resource."""
    return {
        "content": [
            {
                "type": "resource",
                "uri": "test://embedded-resource",
                "mime_type": "text/plain",
                "text": "This is an embedded resource content.",
            }
        ]
    }


@tool
def test_multiple_content_types() -> dict[str, Any]:
    """Returns text, an image and a resource."""
    return {
        "content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "media", "media_type": "image/png", "data": TINY_PNG},
            {
                "type": "resource",
                "uri": "test://mixed-content-resource",
                "mime_type": "application/json",
                "text": '{"test": "data", "value": 123}',
            },
        ]
    }


@tool
def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool
async def test_tool_with_progress() -> AsyncIterator[Any]:
    """Reports progress 0, 50, 100 of 100."""
    for step in (0, 50, 100):
        yield {"progress": step, "total": 100}
    yield "Progress test completed"


def _with_2020_12_schema(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    """Tool with JSON Schema 2020-12 features."""
    return f"{name or 'nobody'} lives at {address or {}}"


# The tool's schema as the scenario gives it (`$schema`, `$defs`, `additionalProperties`):
# announced as written, and listed through the gateway unchanged.
json_schema_2020_12_tool = dataclasses.replace(
    tool(name="json_schema_2020_12_tool")(_with_2020_12_schema),
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    },
)
