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
import pytest

from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.infra import REPO, TOOLS
from tests.support.mcp_servers.launch import own_server_stdio
from tests.support.specs import parked_spec

pytestmark = pytest.mark.e2e

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


# Stand-ins for the two slow commands `agentq sandbox build-images` runs, first on PATH:
# this test is about what a person sees while a build runs, not about Debian or Docker
# (the sandbox suite builds the real images). debootstrap holds until the test has seen
# the live status line, so the build is seen in progress without any timing.
FAKE_DEBOOTSTRAP = """#!/bin/sh
# debootstrap [options] SUITE ROOTFS MIRROR: ROOTFS is the next to last argument
eval rootfs=\\${$(($# - 1))}
mkdir -p "$rootfs/etc" "$rootfs/var/cache/apt/archives" "$rootfs/var/lib/apt/lists"
: > "$rootfs/etc/passwd"; : > "$rootfs/etc/group"
i=0
while [ ! -e "$RELEASE" ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i + 1)); done
"""
FAKE_DOCKER = """#!/bin/sh
case "$1" in
  info) echo 20.10.24 ;;
  image) exit 1 ;;  # `docker image inspect NAME`: no such image yet
  import) cat > /dev/null; echo sha256:0123 ;;
  tag) ;;
  *) echo "fake docker: unexpected $*" >&2; exit 1 ;;
esac
"""


def test_sandbox_build_images_shows_its_progress_on_a_terminal(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, script in (("debootstrap", FAKE_DEBOOTSTRAP), ("docker", FAKE_DOCKER)):
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    release = tmp_path / "release"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "RELEASE": str(release),
        "TERM": "xterm",
        "NO_COLOR": "1",
    }
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentq", "sandbox", "build-images", "--mirror", "http://127.0.0.1:9/debian"],
        cwd=str(REPO),
        env=env,
        encoding="utf-8",
        timeout=PROMPT_TIMEOUT_S,
        dimensions=(50, 200),
    )
    try:
        # What the person sees first: what is built, from where, how, and how long it takes.
        child.expect("building agentq-sandbox-node:v1, agentq-sandbox-python:v1 from ")
        child.expect("http://127.0.0.1:9/debian: debootstrap of a Debian rootfs")
        child.expect("about a minute")
        # Then a live line with the elapsed time while the build runs.
        child.expect("building… \\d+ s")
        release.touch()
        child.expect("built in \\d+ s")
        child.expect("agentq-sandbox-python:v1")
        child.expect(pexpect.EOF)
    finally:
        transcript = child.before or ""
        child.close(force=True)
    assert child.exitstatus == 0, transcript


def test_ctrl_c_at_the_approval_prompt_ends_the_command_at_once(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(parked_spec()))
    child = spawn_run(str(spec), "--tools", TOOLS)
    try:
        child.expect("approve this call\\? \\[y/N\\] ")
        child.sendintr()
        # Before, the first Ctrl-C was swallowed and the process then waited for Enter.
        child.expect("interrupted")
        child.expect(pexpect.EOF)
    finally:
        transcript = child.before or ""
        child.close(force=True)
    assert child.exitstatus == 130, transcript
