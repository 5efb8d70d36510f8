"""A local Anthropic Messages API server for tests (real HTTP on 127.0.0.1).

    with FakeAnthropic([Turn(tool_calls=[ToolCall("add", {"a": 1})]), Turn(text="1")]) as s:
        ModelRef(provider="anthropic", name="claude-x", base_url=s.base_url)

`POST /v1/messages` answers the next turn: named SSE events (`message_start`,
`content_block_start`, `content_block_delta` with `text_delta` /
`input_json_delta` / `thinking_delta` / `signature_delta`, `content_block_stop`,
`message_delta` with `stop_reason` and usage, `message_stop`, plus a `ping`)
when the request says `stream: true`, one message object otherwise. Errors use
the API's `{"type": "error", "error": {"type", "message"}}` body. A turn with
`echo_media` appends what it saw of the request's image blocks
(tests/support/fake_media.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from tests.support import fake_media
from tests.support.fake_batches import AnthropicBatches, line_request
from tests.support.fake_cache import AnthropicCache
from tests.support.fake_http import Recorded, Reply, ScriptedFake
from tests.support.fake_openai import ToolCall

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class ServerToolUse:
    """A provider-executed call (e.g. web_search) and its result block."""

    name: str
    input: dict[str, Any]
    result: list[dict[str, Any]]
    id: str = "srvtoolu_1"


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: str | None = None
    server_tools: list[ServerToolUse] = field(default_factory=list)
    stop_reason: str | None = None  # default: tool_use with calls, else end_turn
    usage: dict[str, Any] = field(
        default_factory=lambda: {
            "input_tokens": 20,
            "output_tokens": 9,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 100,
        }
    )
    status: int = 200
    error: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    fragment_chars: int = 4
    text_chars: int = 3
    # Stream: an `error` event after the first block, as when the API is overloaded mid-way.
    stream_error: str | None = None
    truncate: bool = False  # stream: stop before message_stop, as a cut connection does
    byte_split: int | None = None
    model: str = "claude-fake"
    # Append a line per image block of the request's user turns, tool results included
    # (fake_media.py).
    echo_media: bool = False


def _cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


def _stop(turn: Turn) -> str:
    return turn.stop_reason or ("tool_use" if turn.tool_calls else "end_turn")


def blocks(turn: Turn, index: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if turn.thinking is not None:
        out.append({"type": "thinking", "thinking": turn.thinking, "signature": "sig-abc"})
    for tool in turn.server_tools:
        out.append(
            {"type": "server_tool_use", "id": tool.id, "name": tool.name, "input": tool.input}
        )
        out.append(
            {"type": f"{tool.name}_tool_result", "tool_use_id": tool.id, "content": tool.result}
        )
    if turn.text:
        out.append({"type": "text", "text": turn.text})
    for i, call in enumerate(turn.tool_calls):
        args = json.loads(call.arguments_text())
        out.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{index}_{i}",
                "name": call.name,
                "input": args,
            }
        )
    return out


def message(turn: Turn, index: int) -> dict[str, Any]:
    return {
        "id": f"msg_{index}",
        "type": "message",
        "role": "assistant",
        "model": turn.model,
        "content": blocks(turn, index),
        "stop_reason": _stop(turn),
        "stop_sequence": None,
        "usage": turn.usage,
    }


def stream_events(turn: Turn, index: int) -> list[tuple[str | None, Any]]:
    start_usage = {**turn.usage, "output_tokens": 1}
    start = {**message(turn, index), "content": [], "stop_reason": None, "usage": start_usage}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for i, block in enumerate(blocks(turn, index)):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            first: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": t} for t in _cut(block["text"], turn.text_chars)
            ]
        elif kind in ("tool_use", "server_tool_use"):
            first = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _cut(json.dumps(block["input"]), turn.fragment_chars)
            ]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": t} for t in _cut(block["thinking"], 5)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            first = block  # result blocks arrive whole
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": first},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        if turn.stream_error and i == 0:
            error = {
                "type": "error",
                "error": {"type": "overloaded_error", "message": turn.stream_error},
            }
            events.append(("error", error))
            return events
    if turn.truncate:
        return events
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop(turn), "stop_sequence": None},
                "usage": turn.usage,
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _image_blocks(blocks: Any) -> list[dict[str, Any]]:
    """The image blocks among `blocks`, and among those of the tool results in them."""
    found: list[dict[str, Any]] = []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and block.get("type") == "image":
            found.append(block)
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            found += _image_blocks(block.get("content"))
    return found


def seen_images(messages: Any) -> list[str]:
    """The echo line of each base64 image block of the request's user turns, in order."""
    return [
        fake_media.seen(str(block["source"]["media_type"]), str(block["source"]["data"]))
        for message in messages or []
        if message.get("role") == "user"
        for block in _image_blocks(message.get("content"))
        if (block.get("source") or {}).get("type") == "base64"
    ]


def render(turn: Turn, index: int, request: Recorded) -> Reply:
    if turn.status >= 400:
        error_type = ERROR_TYPES.get(turn.status, "api_error")
        body = {"type": "error", "error": {"type": error_type, "message": turn.error}}
        return Reply.json(body, status=turn.status, headers=turn.headers)
    if turn.echo_media:
        messages = request.body.get("messages") if isinstance(request.body, dict) else None
        turn = replace(turn, text=fake_media.echoed(turn.text, seen_images(messages)))
    wants_stream = isinstance(request.body, dict) and request.body.get("stream")
    if not wants_stream:
        return Reply.json(message(turn, index), headers=turn.headers)
    return Reply.sse(stream_events(turn, index), headers=turn.headers, byte_split=turn.byte_split)


class FakeAnthropic(ScriptedFake[Turn]):
    """`with FakeAnthropic(turns) as server:` — `server.base_url` ends in /v1.

    With `cache`, a turn's input usage is what the API's prompt cache would report for the
    request (tests/support/fake_cache.py); more than 4 breakpoints are refused either way."""

    def __init__(
        self, script: Any = (), port: int = 0, cache: AnthropicCache | None = None
    ) -> None:
        super().__init__(script, port=port)
        self.cache = cache
        # Message Batches, answered by this script (see fake_batches.py).
        self.batches = AnthropicBatches(
            lambda body: self._respond(line_request("/v1/messages", body)),
            lambda: self.base_url,
        )
        self.routes.append(self.batches.handle)

    def refuse(self, request: Recorded) -> Reply | None:
        if request.path != "/v1/messages":
            return Reply.json({"type": "error", "error": {"message": "no route"}}, status=404)
        problem = AnthropicCache.refusal(request.body) if isinstance(request.body, dict) else None
        if problem is not None:
            error = {"type": "invalid_request_error", "message": problem}
            return Reply.json({"type": "error", "error": error}, status=400)
        return None

    def render(self, turn: Turn, index: int, request: Recorded) -> Reply:
        if self.cache is not None and turn.status < 400 and isinstance(request.body, dict):
            turn = replace(turn, usage={**turn.usage, **self.cache.usage(request.body)})
        return render(turn, index, request)

    def exhausted(self, index: int) -> Turn:
        return Turn(status=400, error=f"fake-anthropic: no scripted turn left ({index})")
