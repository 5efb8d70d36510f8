"""A local OpenAI-compatible Chat Completions server for tests (real HTTP on 127.0.0.1).

    from tests.support.fake_openai import FakeOpenAI, Turn, ToolCall

    with FakeOpenAI([Turn(tool_calls=[ToolCall("add", {"a": 1, "b": 2})]), Turn(text="3")]) as s:
        spec = {"model": {"provider": "openai", "name": "m", "base_url": s.base_url}, ...}
        ...
        s.requests[0].body["messages"]      # what the client sent

Each request to `POST /v1/chat/completions` gets the next turn of the script (or
whatever a responder callable returns). A turn answers in the shape the request
asked for: SSE chunks when `stream: true` (tool-call arguments cut into
fragments across chunks; a usage chunk when `stream_options.include_usage`),
one JSON object otherwise. A turn with `status >= 400` answers with an OpenAI
error body and its headers (e.g. 429 with `Retry-After`). When the script is
exhausted the server answers 400 (final, so a test fails fast rather than
retrying). Requests the API refuses are refused with its 400 (a malformed
`response_format`; an image outside a user message or unreadable; a call not
answered by a tool message before the next message); a turn with `echo_media`
appends what it saw of the request's images (tests/support/fake_media.py).

As a separate process, for end-to-end tests of worker processes:

    python -m tests.support.fake_openai --port 0 --script turns.json [--log requests.jsonl]

prints its base URL on the first line of stdout, then serves until killed.
`turns.json` is a JSON list of turn objects (the fields of `Turn`; tool calls as
`{"name", "arguments", "id"?}`); `--log` appends every request as a JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tests.support import fake_media
from tests.support.fake_batches import OpenAIBatches, line_request
from tests.support.fake_cache import OpenAICache
from tests.support.fake_http import Recorded, Reply, ScriptedFake

CREATED = 1_700_000_000


@dataclass
class ToolCall:
    name: str
    arguments: str | dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass
class Turn:
    """One scripted answer."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    # Streamed before the text as `reasoning_content` deltas, as OpenAI-compatible servers
    # that show reasoning (DeepSeek, vLLM, …) do; OpenAI's own API never sends it.
    reasoning: str = ""
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    usage: dict[str, Any] | None = None  # default: a small, fixed usage
    # Errors: status >= 400 answers `{"error": {"message": error, ...}}` with `headers`.
    status: int = 200
    error: str = "scripted error"
    error_type: str = "invalid_request_error"
    headers: dict[str, str] = field(default_factory=dict)
    # Streaming shape: characters per text delta and per argument fragment; `interleave`
    # sends the fragments of parallel calls interleaved (which clients must tolerate).
    text_chars: int = 3
    fragment_chars: int = 4
    interleave: bool = False
    byte_split: int | None = None
    model: str = "fake-model"
    # Append a line per image the request's user messages carry (fake_media.py).
    echo_media: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        data = dict(data)
        data["tool_calls"] = [
            c if isinstance(c, ToolCall) else ToolCall(**c) for c in data.get("tool_calls", [])
        ]
        return cls(**data)


SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def json_schema_problem(spec: Any, where: str) -> str | None:
    """What OpenAI says of a malformed JSON-schema format (a name of a-z, A-Z, 0-9, _ and
    -, at most 64; a schema object), or None."""
    if not isinstance(spec, dict):
        return f"Missing required parameter: '{where}'."
    if not SCHEMA_NAME.match(str(spec.get("name", ""))):
        return f"Invalid '{where}.name': must match ^[a-zA-Z0-9_-]{{1,64}}$."
    if not isinstance(spec.get("schema"), dict):
        return f"Invalid type for '{where}.schema': expected an object."
    return None


def response_format_problem(response_format: Any) -> str | None:
    """Chat Completions' `response_format`, as the API checks it (None: acceptable)."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return "Invalid value for 'response_format.type'."
    if kind == "json_schema":
        return json_schema_problem(
            response_format.get("json_schema"), "response_format.json_schema"
        )
    return None


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []


def messages_problem(messages: Any) -> str | None:
    """What the API says of a conversation it refuses (None: acceptable): images outside
    user messages, unreadable images, and calls left unanswered before the next message."""
    if not isinstance(messages, list):
        return None
    waiting: list[str] = []  # the calls of the last assistant message not answered yet
    for i, message in enumerate(messages):
        role = message.get("role")
        if waiting and role != "tool":
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not "
                f"have response messages: {', '.join(waiting)}"
            )
        for part in _parts(message):
            if part.get("type") != "image_url":
                continue
            if role != "user":
                return (
                    f"Invalid 'messages[{i}]'. Image URLs are only allowed for messages "
                    f"with role 'user', but this message with role '{role}' contains an image URL."
                )
            try:
                fake_media.seen_data_url(str((part.get("image_url") or {}).get("url", "")))
            except ValueError as exc:
                return f"Invalid 'messages[{i}]' image_url: {exc}"
        if role == "assistant":
            waiting = [c.get("id") for c in message.get("tool_calls") or []]
        elif role == "tool" and message.get("tool_call_id") in waiting:
            waiting.remove(message["tool_call_id"])
    return None


def seen_images(messages: Any) -> list[str]:
    """The echo line of each image in the request's user messages, in order."""
    lines = [
        fake_media.seen_data_url(str(part["image_url"]["url"]))
        for message in messages or []
        if message.get("role") == "user"
        for part in _parts(message)
        if part.get("type") == "image_url"
    ]
    return [line for line in lines if line is not None]


def rate_limited(retry_after: str = "0", **headers: str) -> Turn:
    return Turn(
        status=429,
        error="Rate limit reached for requests",
        error_type="requests",
        headers={"retry-after": retry_after, **headers},
    )


def server_error(message: str = "The server had an error while processing your request.") -> Turn:
    return Turn(status=500, error=message, error_type="server_error")


def default_usage() -> dict[str, Any]:
    return {
        "prompt_tokens": 11,
        "completion_tokens": 7,
        "total_tokens": 18,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


def _call_id(turn_index: int, call_index: int, call: ToolCall) -> str:
    return call.id or f"call_{turn_index}_{call_index}"


def _finish(turn: Turn) -> str:
    return turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")


def error_reply(turn: Turn) -> Reply:
    body = {"error": {"message": turn.error, "type": turn.error_type, "param": None, "code": None}}
    return Reply.json(body, status=turn.status, headers=turn.headers)


def completion(turn: Turn, index: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None, "refusal": None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(index, i, call),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_text()},
            }
            for i, call in enumerate(turn.tool_calls)
        ]
    return {
        "id": f"chatcmpl-{index}",
        "object": "chat.completion",
        "created": CREATED,
        "model": turn.model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(turn)}
        ],
        "usage": turn.usage or default_usage(),
    }


def stream_chunks(turn: Turn, index: int, include_usage: bool) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": f"chatcmpl-{index}",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": turn.model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            out["usage"] = None  # the API sends null on every chunk but the last
        return out

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [chunk({"reasoning_content": p}) for p in _cut(turn.reasoning, turn.text_chars)]
    chunks += [chunk({"content": piece}) for piece in _cut(turn.text, turn.text_chars)]
    per_call: list[list[dict[str, Any]]] = []
    for i, call in enumerate(turn.tool_calls):
        first = {
            "index": i,
            "id": _call_id(index, i, call),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        rest = [
            {"index": i, "function": {"arguments": piece}}
            for piece in _cut(call.arguments_text(), turn.fragment_chars)
        ]
        per_call.append([first, *rest])
    if turn.interleave:
        ordered = [f for group in itertools.zip_longest(*per_call) for f in group if f]
    else:
        ordered = [f for group in per_call for f in group]
    chunks += [chunk({"tool_calls": [fragment]}) for fragment in ordered]
    chunks.append(chunk({}, _finish(turn)))
    if include_usage:
        chunks.append({**chunk({}), "choices": [], "usage": turn.usage or default_usage()})
    return chunks


def render(turn: Turn, index: int, request: Recorded) -> Reply:
    if turn.status >= 400:
        return error_reply(turn)
    body = request.body if isinstance(request.body, dict) else {}
    if turn.echo_media:
        turn = replace(turn, text=fake_media.echoed(turn.text, seen_images(body.get("messages"))))
    if not body.get("stream"):
        return Reply.json(completion(turn, index), headers=turn.headers)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    events: list[tuple[str | None, Any]] = [
        (None, c) for c in stream_chunks(turn, index, include_usage)
    ]
    events.append((None, "[DONE]"))
    return Reply.sse(events, headers=turn.headers, byte_split=turn.byte_split)


Script = Sequence[Turn | dict[str, Any]] | Callable[[Recorded], Turn | dict[str, Any]]


class FakeOpenAI(ScriptedFake[Turn]):
    """`with FakeOpenAI(turns) as server:` — `server.base_url` ends in /v1.

    Turns may also be given as dicts (the fields of `Turn`), as in a script file. With
    `cache`, a turn's prompt usage is what the API's automatic prompt cache would report
    for the request (tests/support/fake_cache.py)."""

    def __init__(
        self, script: Script = (), port: int = 0, cache: OpenAICache | None = None
    ) -> None:
        self.cache = cache
        if callable(script):
            responder = script
            super().__init__(lambda request: _as_turn(responder(request)), port=port)
        else:
            super().__init__([_as_turn(t) for t in script], port=port)
        # The Files + Batch API: lines answered by this script (see fake_batches.py).
        self.batches = OpenAIBatches(
            lambda body: self._respond(line_request("/v1/chat/completions", body))
        )
        self.routes.append(self.batches.handle)

    def refuse(self, request: Recorded) -> Reply | None:
        if request.path != "/v1/chat/completions":
            return Reply.json({"error": {"message": f"no route {request.path}"}}, status=404)
        body = request.body if isinstance(request.body, dict) else {}
        for param, problem in (
            ("response_format", response_format_problem(body.get("response_format"))),
            ("messages", messages_problem(body.get("messages"))),
        ):
            if problem is not None:
                error = {"message": problem, "type": "invalid_request_error", "param": param}
                return Reply.json({"error": error}, status=400)
        return None

    def render(self, turn: Turn, index: int, request: Recorded) -> Reply:
        if self.cache is not None and turn.status < 400 and isinstance(request.body, dict):
            prompt, cached = self.cache.cached_tokens(request.body)
            usage = turn.usage or default_usage()
            completion = int(usage["completion_tokens"])
            usage = {
                **usage,
                "prompt_tokens": prompt,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            }
            turn = replace(turn, usage=usage)
        return render(turn, index, request)

    def exhausted(self, index: int) -> Turn:
        return Turn(status=400, error=f"fake-openai: no scripted turn left (request {index})")


def _as_turn(turn: Turn | dict[str, Any]) -> Turn:
    return turn if isinstance(turn, Turn) else Turn.from_dict(turn)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.fake_openai")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", required=True, help="JSON file: a list of turns")
    parser.add_argument("--log", help="append each request as a JSON line to this file")
    args = parser.parse_args(argv)
    with open(args.script) as f:
        turns = [Turn.from_dict(t) for t in json.load(f)]
    fake = FakeOpenAI(turns, port=args.port)
    if args.log:
        log_path: str = args.log
        respond = fake._respond

        def logged(request: Recorded) -> Reply:
            with open(log_path, "a") as log:
                log.write(json.dumps(request.to_json()) + "\n")
            return respond(request)

        fake.http.responder = logged
    print(fake.base_url, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        fake.http.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
