"""`priority` and `fairness` in the spec body of `POST /v1/runs` reach the run's lane
(core/fairness.py), always under the API key's tenant: a spec's `metadata.tenant` cannot
put its run in another tenant's lane, and the key and weight it names divide only its
own tenant's turns, so no setting needs to allow them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.fairness import KEY_FIELD, RANK_FIELD, TENANT_FIELD, WEIGHT_FIELD
from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

KEY = "key-acme-secret"


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": f"{hash_key(KEY)} acme"})
    yield process
    process.stop()


def test_the_spec_body_chooses_priority_and_key_within_the_keys_tenant(
    keyed: ServeProcess, redis_url: str
) -> None:
    spec = {
        **scripted({"text": "hello"}),
        "priority": "high",
        "fairness": {"key": "nightly", "weight": 2},
        "metadata": {"tenant": "globex"},
    }
    headers = {"Authorization": f"Bearer {KEY}"}
    created = httpx.post(f"{keyed.url}/v1/runs", json=spec, headers=headers, timeout=30)
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]

    lane = redis.Redis.from_url(redis_url, decode_responses=True).hmget(
        keys.meta(run_id), [TENANT_FIELD, KEY_FIELD, WEIGHT_FIELD, RANK_FIELD]
    )
    assert lane == ["acme", "nightly", "2", "30000"]

    bad = httpx.post(
        f"{keyed.url}/v1/runs", json={**spec, "priority": "urgent"}, headers=headers, timeout=30
    )
    assert bad.status_code in (400, 422), bad.text
