"""`concurrency` in the spec body of `POST /v1/runs` over real HTTP: the key counts under
the API key's tenant (never the spec's metadata.tenant), GET /v1/runs/{id} shows the key
and max, and a bad one is refused with one line, nothing created."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import placement
from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

KEY = "key-acme-secret"
HEADERS = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": f"{hash_key(KEY)} acme"})
    yield process
    process.stop()


def test_the_spec_body_names_a_key_within_the_api_keys_tenant(keyed: ServeProcess) -> None:
    spec = {
        **scripted({"text": "hello"}),
        "metadata": {"tenant": "globex", "user": "user-42"},
        "concurrency": {"key_from": "metadata.user", "max": 2},
    }
    created = httpx.post(f"{keyed.url}/v1/runs", json=spec, headers=HEADERS, timeout=30)
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    assert run_id.startswith(placement("acme", "user-42"))

    shown = httpx.get(
        f"{keyed.url}/v1/runs/{run_id}", params={"wait": "30"}, headers=HEADERS, timeout=60
    )
    assert shown.status_code == 200, shown.text
    ended = {"key": "user-42", "max": 2, "in_use": None, "held": None, "state": None}
    assert shown.json()["concurrency"] == ended


@pytest.mark.parametrize(
    ("concurrency", "names"),
    [
        ({"key": "user-42", "max": 0}, "concurrency.max"),
        ({"key": "user-42", "max": 1_000_000}, "concurrency.max"),
        ({"key": "x" * 200, "max": 2}, "concurrency.key"),
        ({"key_from": "metadata.(", "max": 2}, "concurrency.key_from"),
        ({"key_from": "metadata.nobody", "max": 2}, "concurrency.key_from"),
    ],
)
def test_a_bad_concurrency_is_refused_with_one_line(
    keyed: ServeProcess, redis_url: str, concurrency: dict[str, object], names: str
) -> None:
    spec = {**scripted({"text": "hello"}), "concurrency": concurrency}
    refused = httpx.post(f"{keyed.url}/v1/runs", json=spec, headers=HEADERS, timeout=30)
    assert refused.status_code == 422, refused.text
    assert names in refused.text
    assert redis.Redis.from_url(redis_url).keys(keys.RUN_PREFIX + "*") == []


def test_a_keyed_resubmission_by_id_is_the_same_run_and_costs_no_submit(
    redis_url: str, worker: WorkerProcess
) -> None:
    """The door finds the run its `id` names where the key placed it: the same spec again
    answers that run (200), not a 429 of a window that has room for one submit."""
    process = ServeProcess(
        redis_url,
        env={"AGENTQ_API_KEYS": f"{hash_key(KEY)} acme", "AGENTQ_SUBMITS_PER_MINUTE": "1"},
    )
    try:
        spec = {
            **scripted({"text": "hello"}),
            "id": "mine",
            "concurrency": {"key": "user-42", "max": 2},
        }
        first = httpx.post(f"{process.url}/v1/runs", json=spec, headers=HEADERS, timeout=30)
        assert first.status_code == 201, first.text
        again = httpx.post(f"{process.url}/v1/runs", json=spec, headers=HEADERS, timeout=30)
        assert again.status_code == 200, again.text
        assert again.json()["id"] == first.json()["id"]
    finally:
        process.stop()
