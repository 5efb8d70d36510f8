"""Normalizing MCP tool results into agentq tool outputs."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from agentq.orchestrator.core.errors import ToolError
from agentq.orchestrator.core.messages import MediaPart
from agentq.workers.tools.mcp.content import normalize_result

pytestmark = pytest.mark.unit

PNG = "iVBORw0KGgo="


def result(*content: dict[str, Any], **extra: Any) -> types.CallToolResult:
    return types.CallToolResult.model_validate({"content": list(content), **extra})


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


IMAGE = {"type": "image", "data": PNG, "mimeType": "image/png"}
AUDIO = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
MEDIA_IMAGE = {"type": "media", "media_type": "image/png", "data": PNG}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(result(text("hi")), "hi", id="lone-text-is-a-string"),
        pytest.param(result(), "", id="nothing-is-empty-text"),
        pytest.param(
            result(text("a"), text("b")),
            {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            id="several-texts",
        ),
        pytest.param(result(IMAGE), {"content": [MEDIA_IMAGE]}, id="image-is-media"),
        pytest.param(
            result(text("look"), IMAGE),
            {"content": [{"type": "text", "text": "look"}, MEDIA_IMAGE]},
            id="text-and-image",
        ),
        pytest.param(
            result(AUDIO),
            {"content": [{"type": "media", "media_type": "audio/wav", "data": "UklGRg=="}]},
            id="audio-is-media",
        ),
        pytest.param(
            result(
                {
                    "type": "resource_link",
                    "uri": "file:///a.txt",
                    "name": "a.txt",
                    "mimeType": "text/plain",
                    "description": "the file",
                }
            ),
            {
                "content": [
                    {
                        "type": "resource-link",
                        "uri": "file:///a.txt",
                        "name": "a.txt",
                        "description": "the file",
                        "mime_type": "text/plain",
                    }
                ]
            },
            id="resource-link",
        ),
        pytest.param(
            result(
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///b.txt",
                        "text": "inside",
                        "mimeType": "text/plain",
                    },
                }
            ),
            {
                "content": [
                    {
                        "type": "resource",
                        "uri": "file:///b.txt",
                        "text": "inside",
                        "mime_type": "text/plain",
                    }
                ]
            },
            id="embedded-text-resource",
        ),
        pytest.param(
            result(
                {
                    "type": "resource",
                    "resource": {"uri": "file:///b.png", "blob": PNG, "mimeType": "image/png"},
                }
            ),
            {"content": [MEDIA_IMAGE]},
            id="embedded-image-is-media",
        ),
        pytest.param(
            result({"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAE="}}),
            {"content": [{"type": "resource", "uri": "file:///b.bin", "data": "AAE="}]},
            id="embedded-blob",
        ),
        pytest.param(
            result(text('{"sum": 5}'), structuredContent={"sum": 5}),
            {"content": [], "structured": {"sum": 5}},
            id="structured-drops-its-json-echo",
        ),
        pytest.param(
            result(text("five"), structuredContent={"sum": 5}),
            {"content": [{"type": "text", "text": "five"}], "structured": {"sum": 5}},
            id="structured-keeps-other-text",
        ),
        pytest.param(
            result(structuredContent={"sum": 5}),
            {"content": [], "structured": {"sum": 5}},
            id="structured-only",
        ),
    ],
)
def test_normalize(given: types.CallToolResult, expected: Any) -> None:
    assert normalize_result(given, tool="t") == expected


def test_media_parts_are_the_neutral_media_shape() -> None:
    [part] = normalize_result(result(IMAGE), tool="t")["content"]
    assert MediaPart.model_validate(part) == MediaPart(media_type="image/png", data=PNG)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        pytest.param(result(text("boom"), isError=True), "boom", id="text"),
        pytest.param(result(text("a"), text("b"), isError=True), "a\nb", id="texts"),
        pytest.param(
            result(isError=True, structuredContent={"code": 7}), '{"code": 7}', id="structured"
        ),
        pytest.param(
            result(IMAGE, isError=True), "the MCP tool 't' reported an error", id="no-text"
        ),
    ],
)
def test_is_error_raises_a_tool_error(given: types.CallToolResult, message: str) -> None:
    with pytest.raises(ToolError) as caught:
        normalize_result(given, tool="t")
    assert caught.value.message.startswith(message)
