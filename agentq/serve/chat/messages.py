"""What a chat request may say, and the run messages of a new turn (pure).

The rule: a client sends only what its user wrote and its answers to the calls the
chat's run waits for. The conversation so far is the server's own record (the chat's
previous run), never the client's copy of it, so a client cannot put words in the
model's or a tool's mouth:

- a `system` message is refused (the agent's template holds its instructions);
- a tool part that claims a result or an approval for a call the chat's run never made
  is refused (a made-up tool result); for a call it did make, the server's record
  stands and the client's copy is not read;
- a new turn is the user messages after the last assistant message. Text stays text,
  files given as `data:` URLs become media.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    TextPart,
    UserMessage,
)

SETTLED = frozenset({"output-available", "output-error", "output-denied"})


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = ""
    role: str
    parts: list[dict[str, Any]] = Field(default_factory=list)


class ChatRequest(BaseModel):
    """The body `DefaultChatTransport` posts: the chat's messages (the whole conversation,
    or only its last ones), or the last `message` alone (the AI SDK persistence guide's
    `prepareSendMessagesRequest`): the history is the server's either way."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    messages: list[UIMessage] = Field(default_factory=list)
    message: UIMessage | None = None
    trigger: str = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId")

    @model_validator(mode="after")
    def _one_form(self) -> ChatRequest:
        if (self.message is None) == (not self.messages):
            raise ValueError("give 'messages' (a non-empty list) or 'message', not both")
        if self.message is not None:
            self.messages = [self.message]
        return self


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


def claims(messages: list[UIMessage]) -> dict[str, str]:
    """The calls the client's tool parts claim a result or an approval answer for: call
    id -> where it says so (`messages[n].parts[k]`)."""
    found: dict[str, str] = {}
    for n, message in enumerate(messages):
        for k, part in enumerate(message.parts):
            answered = (part.get("approval") or {}).get("approved") is not None
            if tool_name(part) is not None and (part.get("state") in SETTLED or answered):
                found.setdefault(str(part.get("toolCallId", "")), f"messages[{n}].parts[{k}]")
    return found


def check_request(messages: list[UIMessage], known_calls: set[str]) -> None:
    """ChatInputError (a 422) for what a client may not send: system messages, roles
    other than user and assistant, results or answers for calls the run never made."""
    for n, message in enumerate(messages):
        where = f"messages[{n}].role"
        if message.role == "system":
            raise ChatInputError(
                f"{where}: a client may not send system messages "
                "(the agent's template holds its instructions)",
                where,
            )
        if message.role not in ("user", "assistant"):
            raise ChatInputError(f"{where}: unknown role {message.role!r}", where)
    for call_id, where in claims(messages).items():
        if call_id not in known_calls:
            raise ChatInputError(
                f"{where}: a result for call {call_id!r}, which this chat's run did not make",
                where,
            )


def new_turn(messages: list[UIMessage]) -> list[UIMessage]:
    """The user messages after the last assistant message: what the user says now."""
    turn: list[UIMessage] = []
    for message in reversed(messages):
        if message.role != "user":
            break
        turn.insert(0, message)
    return turn


def known_calls(conversation: list[Message]) -> set[str]:
    return {
        call.tool_call_id
        for message in conversation
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls()
    }


def user_messages(messages: list[UIMessage]) -> list[Message]:
    """The user's messages as run messages (text, and files as `data:` URLs)."""
    return [_user(m, f"messages[{n}]") for n, m in enumerate(messages) if m.role == "user"]
