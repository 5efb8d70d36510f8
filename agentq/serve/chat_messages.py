"""UIMessages (what `useChat` sends) -> a run's messages (pure).

Text stays text, files given as `data:` URLs become media, and an assistant
message's settled tool parts (output available, error, denied) become tool calls
followed by their results, one assistant/tool pair per step (`step-start`).
Unsettled tool parts are left out: a new run cannot answer them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)

SETTLED = frozenset({"output-available", "output-error", "output-denied"})


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = ""
    role: str
    parts: list[dict[str, Any]] = Field(default_factory=list)


class ChatRequest(BaseModel):
    """The body `DefaultChatTransport` posts."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    messages: list[UIMessage] = Field(min_length=1)
    trigger: str = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId")


class ChatInputError(ValueError):
    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def tool_name(part: dict[str, Any]) -> str | None:
    """The tool of a UI tool part (`tool-NAME` or `dynamic-tool`), None for other parts."""
    kind = str(part.get("type", ""))
    if kind == "dynamic-tool":
        return str(part.get("toolName", ""))
    if kind.startswith("tool-"):
        return kind.removeprefix("tool-")
    return None


def _media(part: dict[str, Any], where: str) -> MediaPart:
    url = str(part.get("url", ""))
    header, sep, data = url.partition(",")
    if not url.startswith("data:") or not sep or not header.endswith(";base64"):
        raise ChatInputError(f"{where}: only base64 data: URLs are accepted for files", where)
    media_type = part.get("mediaType") or header[len("data:") : -len(";base64")]
    return MediaPart(media_type=str(media_type), data=data)


def _user(message: UIMessage, where: str) -> UserMessage:
    parts: list[TextPart | MediaPart] = []
    for n, part in enumerate(message.parts):
        if part.get("type") == "text":
            parts.append(TextPart(text=str(part.get("text", ""))))
        elif part.get("type") == "file":
            parts.append(_media(part, f"{where}.parts[{n}]"))
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return UserMessage(content=parts[0].text)
    return UserMessage(content=parts)


def _result(part: dict[str, Any], call_id: str, name: str) -> ToolResultPart:
    state = part.get("state")
    if state == "output-available":
        return ToolResultPart(tool_call_id=call_id, tool_name=name, output=part.get("output"))
    if state == "output-error":
        text = str(part.get("errorText", "error"))
        return ToolResultPart(tool_call_id=call_id, tool_name=name, output=text, is_error=True)
    reason = (part.get("approval") or {}).get("reason")
    denial = f"The user denied the call to {name!r}" + (f": {reason}" if reason else ".")
    return ToolResultPart(tool_call_id=call_id, tool_name=name, output=denial, is_error=True)


def _assistant(message: UIMessage) -> list[Message]:
    out: list[Message] = []
    segments: list[list[dict[str, Any]]] = [[]]
    for part in message.parts:
        if part.get("type") == "step-start":
            segments.append([])
        else:
            segments[-1].append(part)
    for segment in segments:
        content: list[TextPart | ToolCallPart | ToolResultPart] = []
        results: list[ToolResultPart] = []
        for part in segment:
            name = tool_name(part)
            if part.get("type") == "text" and part.get("text"):
                content.append(TextPart(text=str(part["text"])))
            elif name and part.get("state") in SETTLED:
                call_id = str(part.get("toolCallId", ""))
                provider = bool(part.get("providerExecuted"))
                content.append(
                    ToolCallPart(
                        tool_call_id=call_id,
                        tool_name=name,
                        input=part.get("input"),
                        provider_executed=provider,
                    )
                )
                result = _result(part, call_id, name)
                if provider:
                    content.append(result.model_copy(update={"provider_executed": True}))
                else:
                    results.append(result)
        if content:
            out.append(AssistantMessage(content=content))
        if results:
            out.append(ToolMessage(content=results))
    return out


def run_messages(messages: list[UIMessage]) -> list[Message]:
    out: list[Message] = []
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if message.role == "system":
            text = "".join(str(p.get("text", "")) for p in message.parts if p.get("type") == "text")
            out.append(SystemMessage(content=text))
        elif message.role == "user":
            out.append(_user(message, where))
        elif message.role == "assistant":
            out.extend(_assistant(message))
        else:
            raise ChatInputError(f"{where}.role: unknown role {message.role!r}", f"{where}.role")
    if not out:
        raise ChatInputError("messages: nothing a model could read", "messages")
    return out
