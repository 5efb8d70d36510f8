"""The deployment catalogue end to end: `agentq catalog publish` in a real process, a
run submitted while no worker is up, and the worker that starts afterwards finishing it."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from agentq.orchestrator.core.envelopes import queue_key
from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.tools import ToolAnnouncement
from agentq.orchestrator.tools.announcements import ANNOUNCEMENT_TTL_S
from tests.support.infra import REPO, TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.specs import scripted

pytestmark = pytest.mark.e2e

EMPTY_SERVER = REPO / "tests" / "support" / "mcp_servers" / "empty_server.py"


def write(tmp_path: Path, name: str, body: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(body))
    return str(path)


def mcp_config(tmp_path: Path, servers: dict[str, Any]) -> str:
    return write(tmp_path, "mcp.json", {"mcpServers": servers})


def empty_server() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(EMPTY_SERVER)]}


def broken_server() -> dict[str, Any]:
    sh = shutil.which("sh")
    assert sh is not None
    return {"command": sh, "args": ["-c", "echo no such thing >&2; exit 7"]}


def shown(redis_url: str) -> dict[str, dict[str, Any]]:
    done = run_cli("catalog", "show", "--json", redis_url=redis_url)
    assert done.returncode == 0, done.stderr
    return {f"{e['kind']}:{e['name']}": e for e in json.loads(done.stdout)}


@pytest.fixture
def worker_slot(redis_url: str) -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for process in started:
        process.stop()


def test_a_catalogued_run_waits_queued_until_a_worker_starts(
    redis_url: str, tmp_path: Path, worker_slot: list[WorkerProcess]
) -> None:
    published = run_cli("catalog", "publish", "--tools", TOOLS, redis_url=redis_url)
    assert published.returncode == 0, published.stderr
    assert shown(redis_url)["function:add"]["live"] is False  # catalogued, no worker

    typo = scripted({"text": "x"}, tools=["ad"])
    refused = run_cli("submit", write(tmp_path, "typo.json", typo), redis_url=redis_url)
    assert refused.returncode == 2
    assert "no worker serves the function tool 'ad'" in refused.stderr

    spec = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 2, "b": 3}}]}, {"text": "5"}, tools=["add"]
    )
    submitted = run_cli("submit", write(tmp_path, "spec.json", spec), redis_url=redis_url)
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    with redis.Redis.from_url(redis_url) as r:
        assert r.zcard(queue_key("model")) == 1  # queued, nobody to take it

    worker = WorkerProcess(redis_url, "--tools", TOOLS)
    worker_slot.append(worker)
    wait_ready(worker)
    done = run_cli("wait", run_id, "--timeout", "60", redis_url=redis_url, timeout_s=90)
    assert done.returncode == 0, done.stdout + done.stderr + worker.log()
    result = json.loads(done.stdout)
    assert result["status"] == "succeeded"
    assert result["text"] == "5"
    assert result["steps"][0]["tool_results"][0]["output"] == 5.0
    assert shown(redis_url)["function:add"]["live"] is True


def test_publish_replaces_the_catalogue_and_serves_an_mcp_server_without_tools(
    redis_url: str, tmp_path: Path
) -> None:
    config = mcp_config(tmp_path, {"empty": empty_server()})
    first = run_cli(
        "catalog", "publish", "--tools", TOOLS, "--mcp-config", config, redis_url=redis_url
    )
    assert first.returncode == 0, first.stderr
    catalogue = shown(redis_url)
    assert {"function:add", "function:noop", "mcp-server:empty"} <= set(catalogue)
    assert catalogue["function:add"]["queue"] == "tools"
    assert catalogue["function:add"]["input_schema"]["properties"].keys() == {"a", "b"}

    spec = scripted({"text": "ok"}, tools=["add"])
    spec["tools"].append({"type": "mcp", "server": "empty"})
    accepted = run_cli("submit", write(tmp_path, "spec.json", spec), redis_url=redis_url)
    assert accepted.returncode == 0, accepted.stderr

    models = write(
        tmp_path,
        "models.json",
        {"endpoints": {"local": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"}}},
    )
    second = run_cli("catalog", "publish", "--sandbox", "--models", models, redis_url=redis_url)
    assert second.returncode == 0, second.stderr
    catalogue = shown(redis_url)
    assert set(catalogue) == {"code:run_python", "code:run_javascript", "model-endpoint:local"}
    assert catalogue["code:run_python"]["queue"] == "sandbox"
    refused = run_cli("submit", write(tmp_path, "spec.json", spec), redis_url=redis_url)
    assert refused.returncode == 2
    assert "'add'" in refused.stderr


def test_a_bad_models_file_is_refused(redis_url: str, tmp_path: Path) -> None:
    bad = write(tmp_path, "models.json", {"endpoints": {"x": {"provider": "openai", "nope": 1}}})
    refused = run_cli("catalog", "publish", "--models", bad, redis_url=redis_url)
    assert refused.returncode == 2
    assert "models file" in refused.stderr


def test_an_unreachable_mcp_server_keeps_the_previous_catalogue(
    redis_url: str, tmp_path: Path
) -> None:
    assert run_cli("catalog", "publish", "--tools", TOOLS, redis_url=redis_url).returncode == 0
    config = mcp_config(tmp_path, {"broken": broken_server()})
    failed = run_cli("catalog", "publish", "--mcp-config", config, redis_url=redis_url)
    assert failed.returncode == 3
    assert "MCP server 'broken'" in failed.stderr
    assert "(command: " in failed.stderr  # the server as declared, to find it by
    assert "function:add" in shown(redis_url)


def test_embedded_run_reports_the_mcp_server_that_failed_to_start(tmp_path: Path) -> None:
    config = mcp_config(tmp_path, {"broken": broken_server(), "empty": empty_server()})
    spec = {
        "model": {"provider": "scripted", "script": [{"text": "fine"}]},
        "prompt": "go",
        "tools": [{"type": "mcp", "server": "empty"}, {"type": "mcp", "server": "broken"}],
    }
    failed = run_cli("run", write(tmp_path, "spec.json", spec), "--mcp-config", config)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert "the MCP server 'broken' (declared in" in failed.stderr
    assert "did not start: " in failed.stderr
    assert "no worker serves" not in failed.stderr

    spec["tools"] = [{"type": "mcp", "server": "empty"}]
    ran = run_cli("run", write(tmp_path, "spec.json", spec), "--mcp-config", config, "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["text"] == "fine"


async def test_submit_sees_the_catalogue_under_live_announcements(redis_url: str) -> None:
    """A catalogue entry never goes stale; a worker's live announcement refreshes it; a
    stale announcement hides nothing."""
    redis_ = connect(redis_url)
    store = RunStore(redis_)
    try:
        old = ToolAnnouncement(name="add", kind="function", queue="tools", description="old")
        await store.publish_catalog([old, old.model_copy(update={"name": "sub"})])
        new = old.model_copy(update={"description": "new"})
        await store.announce([new, new.model_copy(update={"name": "extra"})])
        stale = old.model_copy(update={"name": "sub", "description": "stale", "seen_at": 1.0})
        with redis.Redis.from_url(redis_url) as sync:
            sync.hset("aq:registry", "sub", stale.model_dump_json())
        merged = await store.registry()
        now = time.time()
        assert {k: a.description for k, a in merged.items()} == {
            "add": "new",
            "sub": "old",
            "extra": "new",
        }
        assert all(now - a.seen_at <= ANNOUNCEMENT_TTL_S for a in merged.values())
        await store.publish_catalog([])
        assert await store.catalog() == {}
    finally:
        await redis_.aclose()


def test_published_workflows_are_named_by_specs_and_checked_at_publish(
    redis_url: str, tmp_path: Path, worker_slot: list[WorkerProcess]
) -> None:
    folder = tmp_path / "workflows"
    folder.mkdir()
    adder = json.loads((REPO / "examples" / "adder_workflow.json").read_text())
    (folder / "adder.json").write_text(json.dumps(adder))
    published = run_cli(
        "catalog", "publish", "--tools", TOOLS, "--workflows", str(folder), redis_url=redis_url
    )
    assert published.returncode == 0, published.stderr
    assert "workflow adder version 1 (new)" in published.stderr

    call = {"tool_calls": [{"name": "adder", "input": {"x": 2, "y": 3}}]}
    spec = scripted(call, {"text": "5"}, tools=[{"type": "workflow", "workflow": "adder"}])
    submitted = run_cli("submit", write(tmp_path, "spec.json", spec), redis_url=redis_url)
    assert submitted.returncode == 0, submitted.stderr
    worker = WorkerProcess(redis_url, "--tools", TOOLS)
    worker_slot.append(worker)
    wait_ready(worker)
    done = run_cli("wait", submitted.stdout.strip(), "--timeout", "60", redis_url=redis_url)
    assert done.returncode == 0, done.stdout + done.stderr + worker.log()
    assert json.loads(done.stdout)["steps"][0]["tool_results"][0]["output"] == 5.0
    reference = write(tmp_path, "ref.json", {"workflow": "adder"})
    ran = run_cli("workflow", "run", reference, "--input", '{"x": 1, "y": 2}', redis_url=redis_url)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == 3.0

    unknown = scripted({"text": "x"}, tools=[{"type": "workflow", "workflow": "triage"}])
    refused = run_cli("submit", write(tmp_path, "unknown.json", unknown), redis_url=redis_url)
    assert refused.returncode == 2
    assert "tools[0].workflow: no workflow named 'triage' is published" in refused.stderr

    adder["graph"]["edges"].append(["out", "sum"])
    (folder / "adder.json").write_text(json.dumps(adder))
    bad = run_cli("catalog", "publish", "--workflows", str(folder), redis_url=redis_url)
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "agentq: workflow 'adder': graph.edges: the graph has a cycle: sum -> out -> sum"
    ]
    assert shown(redis_url)["function:add"]["live"] is True  # nothing was replaced
