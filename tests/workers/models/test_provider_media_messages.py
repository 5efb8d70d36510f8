"""How Chat Completions and Gemini carry the media of tool results (pure request
builders): beside the text result, since their tool results are text (Chat: a user
message after the tool messages; Gemini: inlineData parts in the function response turn)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.workers.models import gemini, openai_chat

pytestmark = pytest.mark.unit

PNG = base64.b64encode(b"\x89PNG" + b"\0" * 2044).decode()  # 2 kB
PDF = base64.b64encode(b"%PDF-1.7" + b"\0" * 1016).decode()  # 1 kB


def media(media_type: str, data: str) -> dict[str, Any]:
    return {"type": "media", "media_type": media_type, "data": data}


def history(*outputs: Any, is_error: bool = False) -> list[Message]:
    ids = [f"c{i}" for i in range(len(outputs))]
    return [
        UserMessage(content="go"),
        AssistantMessage(content=[ToolCallPart(tool_call_id=i, tool_name="shot") for i in ids]),
        ToolMessage(
            content=[
                ToolResultPart(tool_call_id=i, tool_name="shot", output=o, is_error=is_error)
                for i, o in zip(ids, outputs, strict=True)
            ]
        ),
    ]


IMAGE_AND_PDF = {
    "content": [
        {"type": "text", "text": "here"},
        media("image/png", PNG),
        media("application/pdf", PDF),
    ]
}
DESCRIBED = "here\n[image: image/png, 2 kB, c0#0]\n[application: application/pdf, 1 kB, c0#1]"


def test_chat_text_results_are_unchanged() -> None:
    assert openai_chat.to_messages(None, history({"a": 1}))[2:] == [
        {"role": "tool", "tool_call_id": "c0", "content": '{"a": 1}'}
    ]


def test_chat_sends_images_in_a_user_message_and_describes_the_rest() -> None:
    assert openai_chat.to_messages(None, history(IMAGE_AND_PDF))[2:] == [
        {"role": "tool", "tool_call_id": "c0", "content": DESCRIBED},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[image: image/png, 2 kB, c0#0]"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
    ]


def test_chat_puts_one_user_message_after_all_tool_messages() -> None:
    shot = {"content": [media("image/png", PNG)]}
    roles = [m["role"] for m in openai_chat.to_messages(None, history(shot, "text", shot))]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "user"]


def test_gemini_text_results_are_unchanged() -> None:
    _, contents = gemini.to_contents(history({"a": 1}))
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "shot", "response": {"result": {"a": 1}}}}
    ]


def test_gemini_sends_images_and_pdfs_inline_after_the_function_responses() -> None:
    _, contents = gemini.to_contents(history(IMAGE_AND_PDF, "done"))
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "shot", "response": {"result": DESCRIBED}}},
            {"functionResponse": {"name": "shot", "response": {"result": "done"}}},
            {"inlineData": {"mimeType": "image/png", "data": PNG}},
            {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
        ],
    }


def test_gemini_error_results_carry_their_media_too() -> None:
    _, contents = gemini.to_contents(history({"content": [media("image/png", PNG)]}, is_error=True))
    assert contents[2]["parts"] == [
        {
            "functionResponse": {
                "name": "shot",
                "response": {"error": "[image: image/png, 2 kB, c0#0]"},
            }
        },
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
    ]
