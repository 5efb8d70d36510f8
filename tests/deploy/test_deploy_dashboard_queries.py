"""Every panel of the Grafana dashboard asks Prometheus something real: Debian's
Prometheus scrapes a real `agentq serve`, a real worker and a real sandbox worker (Docker)
on loopback while a few real runs go through them (a tool call, a tool error, a failed
run, a remote tool leased over HTTP, an event stream, a rate-limited OpenAI-compatible
model, code in a sandbox), then each panel's PromQL,
Grafana's variables filled in, is evaluated through Prometheus's HTTP API: it parses and
returns at least one series."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.dashboard import queries
from tests.support.fake_openai import FakeOpenAI, Turn
from tests.support.infra import TOOLS, WorkerProcess, free_port, missing, wait_ready
from tests.support.prometheus import PrometheusProcess, require_prometheus
from tests.support.remote_tools import remote_tools_file
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TENANT_KEY, OPS_KEY, NODE_KEY = "key-acme", "key-ops", "key-node"
ENDED = ("succeeded", "failed", "cancelled")


def require_sandbox() -> None:
    try:
        import docker

        engine = docker.from_env()
        engine.ping()
        engine.images.get("agentq-sandbox-python:v1")
    except Exception as exc:
        missing(f"Docker with the sandbox images ({exc})", "run `bash .ci/sandbox-setup`")


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI([Turn(text="limited")]) as server:
        yield server


@pytest.fixture
def monitored(
    redis_url: str, tmp_path: Path, model: FakeOpenAI
) -> Iterator[tuple[ServeProcess, PrometheusProcess]]:
    require_prometheus()  # before starting anything
    require_sandbox()
    endpoints = {"AGENTQ_ALLOW_SPEC_ENDPOINTS": model.base_url}
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"scripted:*": {"input": 1.0, "output": 2.0}}))
    metrics_port = free_port()
    worker = WorkerProcess(
        redis_url,
        "--tools",
        TOOLS,
        "--metrics-port",
        str(metrics_port),
        "--probe-host",
        "127.0.0.1",
        env={
            **endpoints,
            "OPENAI_API_KEY": "sk-test",
            "AGENTQ_PRICES": str(prices),
            # The rate limit panel's: HTTP providers wait for the fleet's limits.
            "AGENTQ_RATE_LIMITS": json.dumps({"openai:*": [100000, None]}),
        },
    )
    sandbox_port = free_port()
    sandbox = WorkerProcess(
        redis_url,
        *("--sandbox", "--queue", "sandbox", "--metrics-port", str(sandbox_port)),
        *("--probe-host", "127.0.0.1"),
    )
    serve: ServeProcess | None = None
    prometheus: PrometheusProcess | None = None
    try:
        wait_ready(worker)
        wait_ready(sandbox, timeout_s=60)
        keys = [
            f"{hash_key(TENANT_KEY)} acme",
            f"{hash_key(OPS_KEY)} ops metrics",
            f"{hash_key(NODE_KEY)} worker:node queue:node-tools",
        ]
        serve = ServeProcess(
            redis_url,
            env={
                **endpoints,
                "AGENTQ_API_KEYS": "; ".join(keys),
                "AGENTQ_REMOTE_TOOLS": remote_tools_file(),
            },
        )
        credentials = tmp_path / "metrics-key"
        credentials.write_text(OPS_KEY)
        prometheus = PrometheusProcess(
            [
                {
                    "job_name": "agentq-serve",
                    "authorization": {"credentials_file": str(credentials)},
                    "static_configs": [{"targets": [f"127.0.0.1:{serve.port}"]}],
                },
                {
                    "job_name": "agentq-workers",
                    "static_configs": [
                        {"targets": [f"127.0.0.1:{metrics_port}", f"127.0.0.1:{sandbox_port}"]}
                    ],
                },
            ]
        )
        yield serve, prometheus
    finally:
        for process in (prometheus, serve, worker, sandbox):
            if process is not None:
                process.stop()


def _finished(api: httpx.Client, run_id: str) -> dict[str, Any]:
    return eventually(
        lambda: api.get(f"/v1/runs/{run_id}", params={"wait": 5}).json(),
        f"run {run_id} to end",
        60,
        until=lambda run: run["status"] in ENDED,
    )


def _runs(serve: ServeProcess, model: FakeOpenAI) -> None:
    tenant = {"authorization": f"Bearer {TENANT_KEY}"}
    node = {"authorization": f"Bearer {NODE_KEY}"}
    fail_run = {"type": "function", "name": "fail", "on_error": "fail-run"}
    specs = {
        "succeeded": scripted(calls(("add", {"a": 1, "b": 2})), {"text": "3"}, tools=["add"]),
        "tool error": scripted(calls(("fail", {"message": "no"})), {"text": "ok"}, tools=["fail"]),
        "failed": scripted(calls(("fail", {"message": "stop"})), {"text": "-"}, tools=[fail_run]),
        "remote": scripted(
            calls(("shout", {"text": "hi"})),
            {"text": "done"},
            tools=[{"type": "remote", "name": "shout"}],
        ),
        "code": scripted(
            calls(("run_python", {"code": "6 * 7"})),
            {"text": "42"},
            tools=[{"type": "code", "language": "python"}],
        ),
        "limited": {
            "model": {"provider": "openai", "name": "m", "base_url": model.base_url},
            "prompt": "go",
        },
    }
    with httpx.Client(base_url=serve.url, headers=tenant, timeout=60) as api:
        ids = {}
        for name, spec in specs.items():
            created = api.post("/v1/runs", json=spec)
            assert created.status_code == 201, created.text
            ids[name] = created.json()["id"]
        leased = httpx.post(
            f"{serve.url}/v1/queues/node-tools/lease",
            json={"max": 1, "wait_s": 30},
            headers=node,
            timeout=60,
        )
        assert leased.status_code == 200, leased.text
        [call] = leased.json()["calls"]
        answered = httpx.post(
            f"{serve.url}/v1/leases/{call['lease']['id']}/result",
            json={"output": "HI"},
            headers=node,
            timeout=60,
        )
        assert answered.status_code == 200, answered.text
        statuses = {name: _finished(api, run_id)["status"] for name, run_id in ids.items()}
        assert statuses == {
            "succeeded": "succeeded",
            "tool error": "succeeded",
            "failed": "failed",
            "remote": "succeeded",
            "code": "succeeded",
            "limited": "succeeded",
        }
        # An event stream, held until its (ended) run's events are all sent.
        with api.stream(
            "GET", f"/v1/runs/{ids['succeeded']}/events", headers={"accept": "text/event-stream"}
        ) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            for _ in stream.iter_lines():
                pass


def test_every_panel_query_parses_and_returns_a_series(
    monitored: tuple[ServeProcess, PrometheusProcess], model: FakeOpenAI
) -> None:
    serve, prometheus = monitored
    _runs(serve, model)
    wanted = queries()
    assert len(wanted) >= 22

    # A query that does not parse never will: said at once, with Prometheus's error.
    refused = {
        name: answer["error"]
        for name, expr in wanted
        if (answer := prometheus.query(expr))["status"] != "success"
    }
    assert refused == {}

    def empty() -> list[str]:
        return [name for name, expr in wanted if not prometheus.query(expr)["data"]["result"]]

    # A rate needs two scrapes of a series that appeared with the runs.
    left = eventually(empty, "every panel's query to return a series", 60, 1, until=lambda e: not e)
    assert left == []
    targets = prometheus.targets()
    assert {t["labels"]["job"]: t["health"] for t in targets} == {
        "agentq-serve": "up",
        "agentq-workers": "up",
    }
