"""A local OpenAI Responses API server for tests (real HTTP on 127.0.0.1).

`POST /v1/responses` answers the next turn: when `stream: true`, the semantic
events (`response.created`, `response.output_item.added`,
`response.output_text.delta`, `response.function_call_arguments.delta`,
`response.reasoning_summary_text.delta`,
`response.output_item.done`, `response.completed` / `response.incomplete`),
each with `type` and `sequence_number`; otherwise one response object. A turn with
`echo_media` appends what it saw of the request's input images
(tests/support/fake_media.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tests.support import fake_media
from tests.support.fake_batches import OpenAIBatches, line_request
from tests.support.fake_cache import OpenAICache
from tests.support.fake_http import Recorded, Reply, ScriptedFake
from tests.support.fake_openai import ToolCall, json_schema_problem


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None  # a reasoning item (with a summary) before the output
    web_search: str | None = None  # a provider-executed web_search_call with this query
    incomplete: str | None = None  # e.g. "max_output_tokens"
    failed: str | None = None  # response.failed with this message
    usage: dict[str, Any] = field(
        default_factory=lambda: {
            "input_tokens": 30,
            "input_tokens_details": {"cached_tokens": 10},
            "output_tokens": 12,
            "output_tokens_details": {"reasoning_tokens": 4},
            "total_tokens": 42,
        }
    )
    status: int = 200
    error: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    fragment_chars: int = 4
    byte_split: int | None = None
    # Stream: leave `output` out of the terminal event (clients must use the item events).
    terse_completed: bool = False
    # Append a line per input_image of the request's user messages and function call
    # outputs (fake_media.py).
    echo_media: bool = False


def _cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


def output_items(turn: Turn, index: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.reasoning is not None:
        summary = [{"type": "summary_text", "text": turn.reasoning}]
        items.append({"type": "reasoning", "id": f"rs_{index}", "summary": summary})
    if turn.web_search is not None:
        action = {"type": "search", "query": turn.web_search}
        items.append(
            {
                "type": "web_search_call",
                "id": f"ws_{index}",
                "status": "completed",
                "action": action,
            }
        )
    if turn.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{index}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for i, call in enumerate(turn.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{index}_{i}",
                "call_id": call.id or f"call_{index}_{i}",
                "name": call.name,
                "arguments": call.arguments_text(),
                "status": "completed",
            }
        )
    return items


def response_object(turn: Turn, index: int, output: bool = True) -> dict[str, Any]:
    status = "failed" if turn.failed else "incomplete" if turn.incomplete else "completed"
    return {
        "id": f"resp_{index}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": "gpt-fake",
        "output": output_items(turn, index) if output else [],
        "error": {"code": "server_error", "message": turn.failed} if turn.failed else None,
        "incomplete_details": {"reason": turn.incomplete} if turn.incomplete else None,
        "usage": turn.usage,
    }


def stream_events(turn: Turn, index: int) -> list[tuple[str | None, Any]]:
    raw: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": {**response_object(turn, index, False), "status": "in_progress"},
        }
    ]
    for i, item in enumerate(output_items(turn, index)):
        kind = item["type"]
        if kind == "message":
            raw.append(
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {**item, "content": []},
                }
            )
            text = item["content"][0]["text"]
            raw += [
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": i,
                    "content_index": 0,
                    "delta": piece,
                }
                for piece in _cut(text, 3)
            ]
            raw.append(
                {
                    "type": "response.output_text.done",
                    "item_id": item["id"],
                    "output_index": i,
                    "content_index": 0,
                    "text": text,
                }
            )
        elif kind == "function_call":
            raw.append(
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {**item, "arguments": ""},
                }
            )
            raw += [
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item["id"],
                    "output_index": i,
                    "delta": piece,
                }
                for piece in _cut(item["arguments"], turn.fragment_chars)
            ]
            raw.append(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item["id"],
                    "output_index": i,
                    "arguments": item["arguments"],
                }
            )
        elif kind == "reasoning":
            raw.append(
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {**item, "summary": []},
                }
            )
            summary = item["summary"][0]["text"]
            where = {"item_id": item["id"], "output_index": i, "summary_index": 0}
            raw.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    **where,
                    "part": {"type": "summary_text", "text": ""},
                }
            )
            raw += [
                {"type": "response.reasoning_summary_text.delta", **where, "delta": piece}
                for piece in _cut(summary, 4)
            ]
            raw.append({"type": "response.reasoning_summary_text.done", **where, "text": summary})
        else:
            raw.append({"type": "response.output_item.added", "output_index": i, "item": item})
        raw.append({"type": "response.output_item.done", "output_index": i, "item": item})
    final = response_object(turn, index, output=not turn.terse_completed)
    terminal = {
        "completed": "response.completed",
        "incomplete": "response.incomplete",
        "failed": "response.failed",
    }[final["status"]]
    raw.append({"type": terminal, "response": final})
    return [(e["type"], {**e, "sequence_number": n}) for n, e in enumerate(raw)]


def text_format_problem(body: dict[str, Any]) -> str | None:
    """The Responses API's output format, as it checks it: `text.format`, flat (its
    `json_schema` holds name and schema itself); Chat Completions' `response_format` is
    refused by name."""
    if "response_format" in body:
        return (
            "Unsupported parameter: 'response_format'. In the Responses API, this parameter "
            "has moved to 'text.format'."
        )
    fmt = (body.get("text") or {}).get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return "Invalid value for 'text.format.type'."
    return json_schema_problem(fmt, "text.format") if kind == "json_schema" else None


def _content(item: dict[str, Any]) -> list[Any]:
    if item.get("type") == "function_call_output":
        output = item.get("output")
    elif item.get("role") == "user":
        output = item.get("content")
    else:
        return []
    return output if isinstance(output, list) else []


def seen_images(items: Any) -> list[str]:
    """The echo line of each inline input_image of the request's input, in order."""
    lines = [
        fake_media.seen_data_url(str(part.get("image_url", "")))
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict)
        for part in _content(item)
        if isinstance(part, dict) and part.get("type") == "input_image"
    ]
    return [line for line in lines if line is not None]


def render(turn: Turn, index: int, request: Recorded) -> Reply:
    if turn.echo_media:
        items = request.body.get("input") if isinstance(request.body, dict) else None
        turn = replace(turn, text=fake_media.echoed(turn.text, seen_images(items)))
    if turn.status >= 400:
        body = {
            "error": {
                "message": turn.error,
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
        return Reply.json(body, status=turn.status, headers=turn.headers)
    if not (isinstance(request.body, dict) and request.body.get("stream")):
        return Reply.json(response_object(turn, index), headers=turn.headers)
    return Reply.sse(stream_events(turn, index), headers=turn.headers, byte_split=turn.byte_split)


class FakeResponses(ScriptedFake[Turn]):
    """`with FakeResponses(turns) as server:` — `server.base_url` ends in /v1. With
    `cache`, a turn's input usage is what the API's automatic prompt cache would report
    for the request (tests/support/fake_cache.py)."""

    def __init__(self, script: Any = (), port: int = 0, cache: OpenAICache | None = None) -> None:
        super().__init__(script, port=port)
        self.cache = cache
        # The Files + Batch API over the responses endpoint (see fake_batches.py).
        self.batches = OpenAIBatches(
            lambda body: self._respond(line_request("/v1/responses", body))
        )
        self.routes.append(self.batches.handle)

    def refuse(self, request: Recorded) -> Reply | None:
        if request.path != "/v1/responses":
            return Reply.json({"error": {"message": "no route"}}, status=404)
        body = request.body if isinstance(request.body, dict) else {}
        problem = text_format_problem(body)
        if problem is not None:
            return Reply.json({"error": {"message": problem, "type": "invalid_request_error"}}, 400)
        return None

    def render(self, turn: Turn, index: int, request: Recorded) -> Reply:
        if self.cache is not None and turn.status < 400 and isinstance(request.body, dict):
            prompt, cached = self.cache.cached_tokens(request.body)
            output = int(turn.usage["output_tokens"])
            usage = {
                **turn.usage,
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached},
                "total_tokens": prompt + output,
            }
            turn = replace(turn, usage=usage)
        return render(turn, index, request)

    def exhausted(self, index: int) -> Turn:
        return Turn(status=400, error=f"fake-responses: no scripted turn left ({index})")
