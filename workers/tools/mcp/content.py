"""Turn an MCP `CallToolResult` into an agentq tool output. Pure.

Shapes:

- a lone text block and no structured content: the text itself (a string);
- otherwise `{"content": [parts...], "structured": ...}` ("structured" only
  when the server sent `structuredContent`), where parts are
  `{"type": "text", "text"}`, `{"type": "media", "media_type", "data"}`
  (images and audio, base64, the neutral `MediaPart` shape so models get
  them as media), `{"type": "resource-link", "uri", "name", ...}` and
  `{"type": "resource", "uri", "mime_type"?, "text" | "data"}`;
- `isError: true` raises ToolError with the result's text.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from agentq.orchestrator.core.errors import ToolError

Part = dict[str, Any]


def normalize_result(result: types.CallToolResult, *, tool: str) -> Any:
    parts = [normalize_block(block) for block in result.content]
    if result.is_error:
        raise ToolError(_error_text(parts, result.structured_content, tool))
    structured = result.structured_content
    if structured is not None:
        # The spec asks servers to repeat structured content as JSON text for
        # older clients; keeping both would show the model the same data twice.
        parts = [p for p in parts if not _is_json_of(p, structured)]
        return {"content": parts, "structured": structured}
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    if not parts:
        return ""
    return {"content": parts}


def normalize_block(block: types.ContentBlock) -> Part:
    if isinstance(block, types.TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, types.ImageContent | types.AudioContent):
        return {"type": "media", "media_type": block.mime_type, "data": block.data}
    if isinstance(block, types.ResourceLink):
        link: Part = {"type": "resource-link", "uri": str(block.uri), "name": block.name}
        for key, value in (
            ("title", block.title),
            ("description", block.description),
            ("mime_type", block.mime_type),
        ):
            if value is not None:
                link[key] = value
        return link
    if isinstance(block, types.EmbeddedResource):
        return _embedded(block.resource)
    # A block type from a newer protocol revision: keep it rather than drop it.
    dumped: Part = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _embedded(resource: types.TextResourceContents | types.BlobResourceContents) -> Part:
    mime = resource.mime_type
    if isinstance(resource, types.TextResourceContents):
        part: Part = {"type": "resource", "uri": str(resource.uri), "text": resource.text}
    elif mime is not None and mime.startswith(("image/", "audio/")):
        # An embedded image is still an image: the model should see it as one.
        return {"type": "media", "media_type": mime, "data": resource.blob}
    else:
        part = {"type": "resource", "uri": str(resource.uri), "data": resource.blob}
    if mime is not None:
        part["mime_type"] = mime
    return part


def _is_json_of(part: Part, structured: Any) -> bool:
    if part["type"] != "text":
        return False
    try:
        return bool(json.loads(part["text"]) == structured)
    except ValueError:
        return False


def _error_text(parts: list[Part], structured: Any, tool: str) -> str:
    texts = [p["text"] for p in parts if p["type"] == "text" and p["text"]]
    if texts:
        return "\n".join(texts)
    if structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return f"the MCP tool {tool!r} reported an error without a message"
