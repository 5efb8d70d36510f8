"""A local Gemini API server for tests (real HTTP on 127.0.0.1).

`POST /v1beta/models/{model}:generateContent` answers one GenerateContentResponse;
`:streamGenerateContent?alt=sse` answers a series of them as `data:` events (text
in pieces, each functionCall whole, `finishReason` and `usageMetadata` on the
last). Errors use Google's `{"error": {"code", "message", "status"}}` body.
Requests the API refuses are refused with its 400 (a malformed response schema; a
function call turn not answered by as many functionResponse parts; unreadable
`inlineData`); a turn with `echo_media` appends what it saw of the request's
`inlineData` parts (tests/support/fake_media.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tests.support import fake_media
from tests.support.fake_gemini_cache import GeminiCache
from tests.support.fake_http import Recorded, Reply, ScriptedFake
from tests.support.fake_openai import ToolCall

STATUSES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    thought_signature: str | None = None  # attached to the first functionCall part
    thoughts: str = ""  # a thought summary, streamed as `thought: true` parts before the text
    finish_reason: str = "STOP"
    usage: dict[str, Any] = field(
        default_factory=lambda: {
            "promptTokenCount": 40,
            "candidatesTokenCount": 8,
            "thoughtsTokenCount": 5,
            "cachedContentTokenCount": 16,
            "totalTokenCount": 53,
        }
    )
    status: int = 200
    error: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    truncate: bool = False
    byte_split: int | None = None
    # Append a line per inlineData part of the request's user turns (fake_media.py).
    echo_media: bool = False


def _cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


def call_parts(turn: Turn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for i, call in enumerate(turn.tool_calls):
        part: dict[str, Any] = {
            "functionCall": {"name": call.name, "args": json.loads(call.arguments_text())}
        }
        if i == 0 and turn.thought_signature:
            part["thoughtSignature"] = turn.thought_signature
        parts.append(part)
    return parts


def chunk(
    parts: list[dict[str, Any]], finish: str | None = None, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": "gemini-fake",
        "responseId": "r1",
    }
    if usage:
        out["usageMetadata"] = usage
    return out


def output_config_problem(config: dict[str, Any]) -> str | None:
    """generationConfig's response schema, as the API checks it: `responseJsonSchema`
    (JSON Schema) or `responseSchema` (its OpenAPI subset), not both, each with the JSON
    MIME type."""
    given = [name for name in ("responseJsonSchema", "responseSchema") if name in config]
    if len(given) == 2:
        return "responseSchema and responseJsonSchema cannot both be set."
    if given and config.get("responseMimeType") != "application/json":
        return f"{given[0]} requires responseMimeType 'application/json'."
    if given and not isinstance(config[given[0]], dict):
        return f"Invalid value at 'generation_config.{given[0]}'."
    return None


def _parts(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in content.get("parts") or [] if isinstance(p, dict)]


def _count(content: dict[str, Any], kind: str) -> int:
    return sum(1 for p in _parts(content) if kind in p)


def contents_problem(contents: Any) -> str | None:
    """What the API says of contents it refuses (None: acceptable)."""
    if not isinstance(contents, list):
        return None
    for i, content in enumerate(contents):
        calls = _count(content, "functionCall") if content.get("role") == "model" else 0
        answer = contents[i + 1] if i + 1 < len(contents) else None
        if calls and answer is not None and _count(answer, "functionResponse") != calls:
            return (
                "Please ensure that the number of function response parts is equal to the "
                "number of function call parts of the function call turn."
            )
        for part in _parts(content):
            if "inlineData" in part:
                try:
                    _seen(part["inlineData"])
                except ValueError as exc:
                    return f"Invalid value at 'contents[{i}].parts.inline_data': {exc}"
    return None


def _seen(inline: Any) -> str:
    if not isinstance(inline, dict) or not inline.get("mimeType"):
        raise ValueError("inlineData needs a mimeType and data")
    return fake_media.seen(str(inline["mimeType"]), str(inline.get("data", "")))


def seen_media(contents: Any) -> list[str]:
    """The echo line of each inlineData part in the request's user turns, in order."""
    return [
        _seen(part["inlineData"])
        for content in contents or []
        if content.get("role") == "user"
        for part in _parts(content)
        if "inlineData" in part
    ]


def render(turn: Turn, request: Recorded) -> Reply:
    if turn.status >= 400:
        status = STATUSES.get(turn.status, "UNKNOWN")
        body = {"error": {"code": turn.status, "message": turn.error, "status": status}}
        return Reply.json(body, status=turn.status, headers=turn.headers)
    if turn.echo_media:
        contents = request.body.get("contents") if isinstance(request.body, dict) else None
        turn = replace(turn, text=fake_media.echoed(turn.text, seen_media(contents)))
    if request.path.endswith(":generateContent"):
        thought = [{"text": turn.thoughts, "thought": True}] if turn.thoughts else []
        parts = thought + ([{"text": turn.text}] if turn.text else []) + call_parts(turn)
        return Reply.json(chunk(parts, turn.finish_reason, turn.usage), headers=turn.headers)
    chunks = [chunk([{"text": piece, "thought": True}]) for piece in _cut(turn.thoughts, 4)]
    chunks += [chunk([{"text": piece}]) for piece in _cut(turn.text, 4)]
    if not turn.truncate:
        chunks.append(chunk(call_parts(turn), turn.finish_reason, turn.usage))
    return Reply.sse([(None, c) for c in chunks], headers=turn.headers, byte_split=turn.byte_split)


class FakeGemini(ScriptedFake[Turn]):
    """`with FakeGemini(turns) as server:` — `server.base_url` ends in /v1beta.

    With `cache`, the API's context caching (tests/support/fake_gemini_cache.py): the
    cachedContents resource, the requests that name one, and a turn's prompt usage as
    the implicit or explicit cache would report it."""

    api_root = "/v1beta"

    def __init__(
        self,
        script: Sequence[Turn] | Callable[[Recorded], Turn] = (),
        port: int = 0,
        cache: GeminiCache | None = None,
    ) -> None:
        super().__init__(script, port=port)
        self.cache = cache
        if cache is not None:
            self.routes.append(cache.route)

    def refuse(self, request: Recorded) -> Reply | None:
        if self.cache is not None and (refused := self.cache.refusal(request)) is not None:
            return refused
        if not request.path.startswith("/v1beta/models/"):
            return Reply.json({"error": {"code": 404, "message": "no route"}}, status=404)
        if request.path.endswith(":streamGenerateContent") and request.query.get("alt") != ["sse"]:
            return Reply.json({"error": {"code": 400, "message": "fake: only alt=sse"}}, status=400)
        body = request.body if isinstance(request.body, dict) else {}
        problem = output_config_problem(body.get("generationConfig") or {}) or contents_problem(
            body.get("contents")
        )
        if problem is not None:
            error = {"code": 400, "message": problem, "status": "INVALID_ARGUMENT"}
            return Reply.json({"error": error}, status=400)
        return None

    def render(self, turn: Turn, index: int, request: Recorded) -> Reply:
        if self.cache is not None and turn.status < 400:
            prompt, cached = self.cache.usage(request)
            answer = int(turn.usage.get("candidatesTokenCount", 0))
            thoughts = int(turn.usage.get("thoughtsTokenCount", 0))
            usage = {
                **turn.usage,
                "promptTokenCount": prompt,
                "cachedContentTokenCount": cached,
                "totalTokenCount": prompt + answer + thoughts,
            }
            turn = replace(turn, usage=usage)
        return render(turn, request)

    def exhausted(self, index: int) -> Turn:
        return Turn(status=400, error=f"fake-gemini: no scripted turn left ({index})")
