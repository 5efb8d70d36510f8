"""`agentq run` on a real terminal (a pty driven by pexpect): a person answers the
question an MCP server asks (elicitation forwarded to the run) at the prompt, and the
tool call finishes with that answer.

Embedded run: an in-memory Redis, our MCP test server over stdio, and a local
OpenAI-compatible model, all started by the one `agentq run` process."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect

from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.infra import REPO
from tests.support.mcp_servers.launch import own_server_stdio

PROMPT_TIMEOUT_S = 90  # a deadline for each expected line, not a timing assertion


def spawn_run(*args: str) -> pexpect.spawn[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OPENAI_API_KEY": "sk-test",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    env.pop("AGENTQ_REDIS_URL", None)
    return pexpect.spawn(
        sys.executable,
        ["-m", "agentq", "run", *args],
        cwd=str(REPO),
        env=env,
        encoding="utf-8",
        timeout=PROMPT_TIMEOUT_S,
        dimensions=(50, 200),
    )


def test_a_person_answers_an_mcp_question_at_the_prompt(
    tmp_path: Path, allow_loopback_specs: None
) -> None:
    config = tmp_path / "mcp.json"
    server = own_server_stdio(elicitation="forward", timeout_s=120)
    config.write_text(json.dumps({"mcpServers": {"own": server}}))
    turns = [Turn(tool_calls=[ToolCall("greet", {}, id="c_greet")]), Turn(text="greeted Grace")]
    with FakeOpenAI(turns) as model:
        spec = tmp_path / "spec.json"
        spec.write_text(
            json.dumps(
                {
                    "model": {"provider": "openai", "name": "m", "base_url": model.base_url},
                    "prompt": "greet me",
                    "tools": [{"type": "mcp", "server": "own", "tools": ["greet"]}],
                }
            )
        )
        child = spawn_run(str(spec), "--mcp-config", str(config))
        try:
            # What the person sees: the question, the expected shape, then the prompt.
            child.expect("Who are you\\?")
            child.expect("expected: ")
            child.expect("answer as a JSON object \\(empty declines\\): ")
            child.sendline("not json")
            child.expect("not JSON")
            child.expect("answer as a JSON object")
            child.sendline('{"name": "Grace", "age": 85}')
            child.expect("greeted Grace")
            child.expect(pexpect.EOF)
        finally:
            transcript = child.before or ""
            child.close(force=True)
        sent = [r.body for r in model.requests]

    assert child.exitstatus == 0, transcript
    # The tool's result the model saw is the server's greeting built from the answer.
    tool_messages = [m for m in sent[-1]["messages"] if m.get("role") == "tool"]
    assert tool_messages, sent[-1]
    assert "hello Grace (85)" in json.dumps(tool_messages)
