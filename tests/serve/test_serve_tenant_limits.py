"""AGENTQ_TENANT_LIMITS at the doors, over real HTTP and the CLI: a tenant at its
max_in_flight gets a 429 naming `tenant_max_in_flight` with a Retry-After (the CLI, one
line and exit 2) while another tenant's run is created."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess, run_cli
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme", "globex": "key-globex"}
LIMITS = json.dumps({"acme": {"max_in_flight": 1}})


@pytest.fixture
def limited(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    keys = "; ".join(f"{hash_key(key)} {tenant}" for tenant, key in KEYS.items())
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": keys, "AGENTQ_TENANT_LIMITS": LIMITS})
    yield process
    process.stop()


def holding(tmp: Path) -> dict[str, Any]:
    args = {"started": str(tmp / "started"), "gate": str(tmp / "gate")}
    return scripted(calls(("hold_until", args)), {"text": "done"}, tools=["hold_until"])


def submit(server: ServeProcess, who: str, spec: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    return httpx.post(f"{server.url}/v1/runs", headers=headers, json=spec, timeout=30)


def test_a_tenant_at_its_cap_gets_a_429_and_another_does_not(
    limited: ServeProcess, redis_url: str, tmp_path: Path
) -> None:
    try:
        assert submit(limited, "acme", holding(tmp_path)).status_code == 201
        over = submit(limited, "acme", holding(tmp_path))
        assert over.status_code == 429, over.text
        assert over.json()["error"]["limit"] == "tenant_max_in_flight"
        assert int(over.headers["Retry-After"]) >= 1
        assert submit(limited, "globex", scripted({"text": "hi"})).status_code == 201
        # The CLI (the default tenant, capped by `*` here): one line, exit 2.
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps(holding(tmp_path)))
        env = {"AGENTQ_TENANT_LIMITS": json.dumps({"*": {"max_in_flight": 1}})}
        assert run_cli("submit", str(spec), redis_url=redis_url, env=env).returncode == 0
        cli = run_cli("submit", str(spec), redis_url=redis_url, env=env)
        assert cli.returncode == 2, cli.stderr
        assert cli.stderr.strip() == (
            "agentq: tenant 'default' is at its tenant_max_in_flight of 1 runs "
            "(AGENTQ_TENANT_LIMITS): try again in 1 s"
        )
    finally:
        (tmp_path / "gate").touch()
