"""`GET /v1/queues`, as KEDA's metrics-api scaler reads it: a pool scaled to zero sees
its first job here (`queues.<name>.depth`), and the endpoint needs a key with runs:read."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import TOOLS, run_cli
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

READER = "key-keda-reader"  # the operator's: scope admin
SUBMITTER = "key-submitter"  # a tenant's, with every tenant scope


@pytest.fixture
def keyed(redis_url: str) -> Iterator[ServeProcess]:
    keys = f"{hash_key(READER)} ops admin; {hash_key(SUBMITTER)} acme"
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": keys})
    yield process
    process.stop()


def depths(server: ServeProcess, key: str, **params: str) -> httpx.Response:
    return httpx.get(
        f"{server.url}/v1/queues",
        params=params,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_queue_depth_for_a_pool_scaled_to_zero(redis_url: str, keyed: ServeProcess) -> None:
    published = run_cli("catalog", "publish", "--tools", TOOLS, redis_url=redis_url)
    assert published.returncode == 0, published.stderr
    assert httpx.get(f"{keyed.url}/v1/queues", timeout=30).status_code == 401
    # Depths and workers are every tenant's: a tenant key sees neither.
    for path in ("/v1/queues", "/v1/fleet", "/v1/workers"):
        tenant = httpx.get(
            f"{keyed.url}{path}", headers={"Authorization": f"Bearer {SUBMITTER}"}, timeout=30
        )
        assert tenant.status_code == 403, (path, tenant.text)
        assert "'admin'" in tenant.json()["error"]["message"]
    operator = httpx.get(
        f"{keyed.url}/v1/fleet", headers={"Authorization": f"Bearer {READER}"}, timeout=30
    )
    assert operator.status_code == 200, operator.text

    empty = depths(keyed, READER, queue="orders")
    assert empty.status_code == 200, empty.text
    assert empty.json() == {
        "queues": {
            name: {
                "depth": 0,
                "ready": 0,
                "running": 0,
                "held": 0,
                "scheduled": 0,
                "oldest_age_s": 0.0,
            }
            for name in ("model", "orders", "tools")
        }
    }

    spec = scripted({"text": "hi"}, tools=["add"])
    submitted = httpx.post(
        f"{keyed.url}/v1/runs",
        json=spec,
        headers={"Authorization": f"Bearer {SUBMITTER}"},
        timeout=30,
    )
    assert submitted.status_code in (200, 201, 202), submitted.text
    model = depths(keyed, READER).json()["queues"]["model"]
    assert (model["depth"], model["ready"]) == (1, 1)
    assert model["oldest_age_s"] >= 0.0
