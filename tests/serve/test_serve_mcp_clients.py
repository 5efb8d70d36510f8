"""`agentq serve --mcp` driven by third-party MCP clients: the MCP Inspector's CLI mode
and the MCP conformance suite's server scenarios (npm, installed by .ci/mcp-tools-setup),
against a real redis-server, a real worker serving tests/support/conformance_tools.py
and, over stdio, the upstream MCP server tests/support/mcp_servers/conformance_server.py
(whose tools elicit, sample and log, forwarded to the gateway's client), and a real
`agentq serve --mcp` on loopback (no API keys: neither tool sends one).

The conformance results of every scenario are written to
`$AGENTQ_CONFORMANCE_REPORT` (default: the test's tmp dir) as JSON, for the record.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.infra import REPO, WorkerProcess, missing, wait_ready
from tests.support.mcp_servers.launch import HERE as MCP_SERVERS
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.integration

NODE_DIR = REPO / "tests/support/node/mcp-tools/node_modules/@modelcontextprotocol"
INSPECTOR = NODE_DIR / "inspector-cli/build/index.js"
CONFORMANCE = NODE_DIR / "conformance/dist/index.js"
TOOLS = ("tests/support/conformance_tools.py", "tests/support/call_tools.py")

# The server scenarios the gateway passes. It serves tools only: the scenarios of
# resources, prompts and completion do not apply (and fail).
PASSING = (
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "tools-call-with-logging",
    "logging-set-level",
    "tools-call-sampling",
    "json-schema-2020-12",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)


def _need(path: Path, what: str) -> None:
    if not path.is_file():
        missing(what, "run .ci/mcp-tools-setup (npm)")


@pytest.fixture
def gateway(redis_url: str, tmp_path: Path) -> Iterator[ServeProcess]:
    upstream = {
        "command": sys.executable,
        "args": [str(MCP_SERVERS / "conformance_server.py")],
        "elicitation": "forward",
        "timeout_s": 60,
        # Its tools ask over the session (`elicitation/create` with the scenarios' raw
        # schemas), which the handshake-era protocol carries over stdio.
        "protocol": "legacy",
        "sampling": "forward",
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"conformance": upstream}}))
    tools = (arg for t in TOOLS for arg in ("--tools", t))
    worker = WorkerProcess(redis_url, *tools, "--mcp-config", str(config))
    wait_ready(worker, timeout_s=60)
    server = ServeProcess(redis_url, "--mcp")
    yield server
    server.stop()
    worker.stop()


def _node(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", *map(str, args)], capture_output=True, text=True, timeout=180, cwd=REPO
    )


def test_the_inspector_lists_and_calls_tools(gateway: ServeProcess) -> None:
    _need(INSPECTOR, "the MCP Inspector CLI")
    url = f"{gateway.url}/mcp"
    listed = _node(INSPECTOR, url, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
    assert {"echo", "test_simple_text", "count_up"} <= names
    called = _node(
        INSPECTOR, url, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hi"
    )
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {
        "content": [{"type": "text", "text": "hi"}],
        "isError": False,
    }


def _scenarios() -> list[str]:
    listed = _node(CONFORMANCE, "list", "--server")
    text = listed.stdout if listed.returncode == 0 else _node(CONFORMANCE, "list").stdout
    section = text.split("Client scenarios")[0]
    return re.findall(r"^\s+- (\S+)$", section, flags=re.MULTILINE)


def test_the_conformance_suite_s_server_scenarios(gateway: ServeProcess, tmp_path: Path) -> None:
    _need(CONFORMANCE, "the MCP conformance suite")
    results: dict[str, str] = {}
    for scenario in _scenarios():
        run = _node(CONFORMANCE, "server", "--url", f"{gateway.url}/mcp", "--scenario", scenario)
        found = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", run.stdout)
        summary = found.group(0) if found else (run.stdout + run.stderr)[-300:]
        results[scenario] = ("pass" if run.returncode == 0 else "FAIL") + f" ({summary})"
    report = Path(os.environ.get("AGENTQ_CONFORMANCE_REPORT", tmp_path / "conformance.json"))
    report.write_text(json.dumps(results, indent=2))
    failed = {s: r for s, r in results.items() if s in PASSING and not r.startswith("pass")}
    assert failed == {}, f"see {report}"
    assert set(PASSING) <= set(results)
