"""Structured output on every wire format: `agentq worker` processes, a real
redis-server, `agentq submit`/`wait`, and the local fakes of the four providers, which
check the documented request shapes (a malformed one is a 400, as the APIs answer).

`auto` is native where the wire format has a JSON-schema response format (Chat
Completions `response_format`, Responses `text.format`, Gemini `responseJsonSchema`), the
final-answer tool elsewhere (Anthropic Messages); an invalid answer goes back and the
second one is the output."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import fake_anthropic, fake_gemini, fake_openai, fake_responses
from tests.support.fake_http import Recorded
from tests.support.fake_openai import ToolCall
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready

pytestmark = pytest.mark.e2e

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["number", "total"],
}
GOOD = {"number": "A-1", "total": 12.5}
KEYS = {
    "OPENAI_API_KEY": "sk-test",
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "GEMINI_API_KEY": "AIza-test",
}


@dataclass(frozen=True)
class Wire:
    provider: str
    fake: Callable[[list[Any]], Any]
    turn: Callable[..., Any]
    native: Callable[[dict[str, Any]], Any]  # where the request carries the schema
    retry_seen: Callable[[dict[str, Any]], bool]  # the second request holds the retry

    def answers(self, answer: dict[str, Any], *, tool: bool) -> Any:
        if tool:
            return self.turn(tool_calls=[ToolCall("final_result", answer)])
        return self.turn(text=json.dumps(answer))


def _has(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda body: text in json.dumps(body)


WIRES = {
    "openai": Wire(
        "openai",
        fake_openai.FakeOpenAI,
        fake_openai.Turn,
        lambda body: body["response_format"],
        _has("did not match the required output schema"),
    ),
    "openai-responses": Wire(
        "openai-responses",
        fake_responses.FakeResponses,
        fake_responses.Turn,
        lambda body: body["text"]["format"],
        _has("did not match the required output schema"),
    ),
    "gemini": Wire(
        "gemini",
        fake_gemini.FakeGemini,
        fake_gemini.Turn,
        lambda body: body["generationConfig"],
        _has("did not match the required output schema"),
    ),
    "anthropic": Wire(
        "anthropic",
        fake_anthropic.FakeAnthropic,
        fake_anthropic.Turn,
        lambda body: body.get("output_format"),
        _has("did not match the required output schema"),
    ),
}
NATIVE_SHAPES: dict[str, dict[str, Any] | None] = {
    "openai": {"type": "json_schema", "json_schema": {"name": "final_result", "schema": INVOICE}},
    "openai-responses": {"type": "json_schema", "name": "final_result", "schema": INVOICE},
    "gemini": {"responseMimeType": "application/json", "responseJsonSchema": INVOICE},
    "anthropic": None,  # no native format used: the final-answer tool
}


@pytest.fixture
def worker(redis_url: str, allow_loopback_specs: None) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS, env=KEYS)
    wait_ready(process)
    yield process
    process.stop()


def run(tmp_path: Path, redis_url: str, spec: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    submitted = run_cli("submit", str(path), redis_url=redis_url)
    assert submitted.returncode == 0, submitted.stderr
    done = run_cli("wait", submitted.stdout.strip(), "--timeout", "60", redis_url=redis_url)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("name", list(WIRES))
def test_auto_mode_on_each_wire_format(
    name: str, redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    wire = WIRES[name]
    tool = NATIVE_SHAPES[name] is None
    turns = [wire.answers({"number": "A-1"}, tool=tool), wire.answers(GOOD, tool=tool)]
    with wire.fake(turns) as server:
        spec = {
            "model": {"provider": wire.provider, "name": "m-test", "base_url": server.base_url},
            "prompt": "Extract the invoice.",
            "output": {"schema": INVOICE},
        }
        result = run(tmp_path, redis_url, spec)
        sent: list[Recorded] = list(server.requests)
    assert result["status"] == "succeeded", (result.get("error"), worker.log())
    assert result["output"] == GOOD
    first, second = (r.body for r in sent)
    assert isinstance(first, dict)
    assert isinstance(second, dict)
    if tool:
        assert wire.native(first) is None
        assert "final_result" in json.dumps(first["tools"])
    else:
        assert wire.native(first) == NATIVE_SHAPES[name]
        assert "tools" not in first  # no final-answer tool beside the response format
    assert wire.retry_seen(second)
    assert not wire.retry_seen(first)


def test_a_malformed_response_format_is_refused_by_the_fake() -> None:
    """The fakes hold requests to the documented shapes (what the test above relies on)."""
    assert fake_openai.response_format_problem({"type": "json_schema", "json_schema": {}})
    assert fake_openai.response_format_problem(NATIVE_SHAPES["openai"]) is None
    assert fake_responses.text_format_problem({"response_format": NATIVE_SHAPES["openai"]})
    assert fake_responses.text_format_problem({"text": {"format": NATIVE_SHAPES["openai"]}})
    assert (
        fake_responses.text_format_problem({"text": {"format": NATIVE_SHAPES["openai-responses"]}})
        is None
    )
    assert fake_gemini.output_config_problem({"responseJsonSchema": INVOICE})
    assert fake_gemini.output_config_problem(
        {
            "responseJsonSchema": INVOICE,
            "responseSchema": {},
            "responseMimeType": "application/json",
        }
    )
    assert fake_gemini.output_config_problem(NATIVE_SHAPES["gemini"] or {}) is None
