"""docker-compose.yml brought up for real: the images `agentq images build` makes (no
registry), the whole stack with the trace and monitoring profiles (Grafana left out: it
comes from Docker Hub), a run through the HTTP API with a function tool and a code tool,
the tools container killed mid-call and started again, the run's trace in Phoenix,
Prometheus scraping the API and every pool, and nothing left behind.

The sandbox pool's code runs in the stack's own Docker engine (Docker-in-Docker), not
the host's. Long the first time (images: ~10 min on 2 cores); a few minutes once they
exist. Run it alone with `pytest -m compose`."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentq.orchestrator import tracing
from tests.support.compose_stack import Stack, leftovers, prepare_images, require_docker_compose
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.compose]

MODEL_PORT = 8765  # the scripted model, on the model pool's loopback (compose/ci.yml)
WORKERS = ("model", "tools", "sandbox")
SCRIPT: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {"name": "hold", "arguments": {"text": "compose"}, "id": "c_hold"},
            {"name": "run_python", "arguments": {"code": "print(6 * 7)"}, "id": "c_code"},
        ]
    },
    {"text": "COMPOSE and 42"},
]


def spec(run_id: str) -> dict[str, Any]:
    return {
        "id": run_id,
        "model": {
            "provider": "openai",
            "name": "scripted",
            "base_url": f"http://127.0.0.1:{MODEL_PORT}/v1",
        },
        "prompt": "upper-case 'compose' and compute 6 * 7",
        "tools": [{"type": "function", "name": "hold"}, {"type": "code", "language": "python"}],
    }


def test_the_compose_stack_runs_an_agent_through_a_tools_restart(tmp_path: Path) -> None:
    binary = require_docker_compose()
    times: dict[str, float] = {}
    began = time.monotonic()
    images = prepare_images()
    times["images"] = time.monotonic() - began
    stack = Stack(binary, images, tmp_path / "ci", SCRIPT)
    stack.down()  # what a crashed earlier run may have left
    state = stack.workdir / "state"
    try:
        began = time.monotonic()
        stack.up()
        # Phoenix too: spans exported before it listens are lost.
        stack.wait_healthy(("redis", "engine", "api", *WORKERS, "phoenix", "prometheus"))
        times["up to healthy"] = time.monotonic() - began

        began = time.monotonic()
        run_id = f"compose-{int(time.time())}"
        with stack.http() as api:
            created = api.post("/v1/runs", json=spec(run_id))
            assert created.status_code == 201, created.text
            # With keys, a spec's id lives in the tenant's namespace: the answer names it.
            run_id = created.json()["id"]

            # The function call is held in the tools worker: kill that worker there.
            eventually(lambda: (state / "started").is_file(), "the hold call to start", 120, 0.2)
            tools = stack.container("tools")
            subprocess.run(["docker", "kill", tools], check=True, capture_output=True)
            (state / "release").touch()
            started = stack.compose("start", "tools")
            assert started.returncode == 0, started.stderr
            stack.wait_healthy(("tools",), timeout_s=120)

            def finished() -> dict[str, Any]:
                reply: dict[str, Any] = api.get(f"/v1/runs/{run_id}").raise_for_status().json()
                return reply

            result = eventually(
                finished,
                "the run to finish",
                240,
                0.5,
                until=lambda r: r["status"] not in ("queued", "running"),
            )
        times["run"] = time.monotonic() - began
        assert result["status"] == "succeeded", json.dumps(result)[:3000] + stack.logs()
        assert result["text"] == "COMPOSE and 42"
        outputs = {r["tool_call_id"]: r for r in result["steps"][0]["tool_results"]}
        assert outputs["c_hold"]["output"] == "COMPOSE"
        assert "42" in json.dumps(outputs["c_code"]["output"])
        # The held call was delivered twice: to the killed worker, then the restarted one.
        assert len((state / "started").read_text().splitlines()) == 2

        # The run's trace arrived in Phoenix (OTLP from the api and every pool).
        began = time.monotonic()
        trace_id = format(tracing.run_ids(run_id)[0], "032x")

        def spans() -> list[dict[str, Any]]:
            try:
                reply = httpx.get(
                    f"{stack.phoenix}/v1/projects/default/spans",
                    params={"trace_id": [trace_id], "limit": 1000},
                    timeout=10,
                )
            except httpx.HTTPError:
                return []
            if reply.status_code != 200:
                return []
            data: list[dict[str, Any]] = reply.json()["data"]
            return data

        # Each process exports on its own schedule: wait for the spans of every pool (the
        # killed worker's span of the held call never ended; the restarted one's did).
        wanted = {
            "invoke_agent agentq",
            "chat scripted",
            "execute_tool hold",
            "execute_tool run_python",
        }
        eventually(
            spans,
            "the run's trace in phoenix",
            120,
            1,
            until=lambda found: wanted <= {x["name"] for x in found},
        )
        times["trace"] = time.monotonic() - began

        # Prometheus finds every agentq process by its service's name and scrapes it (the
        # API with the metrics key); the restarted tools container is found again.
        began = time.monotonic()

        def targets() -> dict[str, str]:
            try:
                reply = httpx.get(f"{stack.prometheus}/api/v1/targets", timeout=10)
            except httpx.HTTPError:
                return {}
            return {
                t["discoveredLabels"]["__meta_dns_name"]: t["health"]
                for t in reply.json()["data"]["activeTargets"]
            }

        eventually(
            targets,
            "prometheus to scrape every agentq process",
            120,
            1,
            until=lambda found: found == {name: "up" for name in ("api", *WORKERS)},
        )
        times["scraped"] = time.monotonic() - began
    finally:
        began = time.monotonic()
        stack.down()
        times["down"] = time.monotonic() - began
        print(f"compose test times (s): {json.dumps({k: round(v) for k, v in times.items()})}")
        print(f"image builds (s): {json.dumps({k: round(v) for k, v in images.seconds.items()})}")
    assert leftovers() == {"containers": [], "networks": [], "volumes": []}
