"""Run ids, idempotency keys and batch line ids live in the tenant's namespace (issue 25,
item 9): adversarial, with two tenants' keys against a real `agentq serve`, a worker
process and a redis-server, and through `Client` (the orchestrator names the runs, so
the Python API and the CLI get the same namespaces as the HTTP door)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from agentq.orchestrator.client import Client
from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme", "globex": "key-globex"}
SPEC = scripted({"text": "hello"}, tools=[])
OTHER_SPEC = scripted({"text": "another"}, tools=[])


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(f"{hash_key(key)} {tenant}" for tenant, key in KEYS.items())
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": lines})
    yield process
    process.stop()


def call(server: ServeProcess, method: str, path: str, who: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}", **kw.pop("headers", {})}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)


def created(response: httpx.Response) -> str:
    assert response.status_code == 201, response.text
    run_id: str = response.json()["id"]
    return run_id


def test_a_tenant_cannot_take_or_probe_another_tenants_run_ids(keyed: ServeProcess) -> None:
    # globex takes the id acme is about to use: acme's submit is untouched by it.
    squatted = created(call(keyed, "POST", "/v1/runs", "globex", json={**SPEC, "id": "order-42"}))
    mine = created(call(keyed, "POST", "/v1/runs", "acme", json={**OTHER_SPEC, "id": "order-42"}))
    assert mine != squatted
    assert mine.endswith(".order-42")
    again = call(keyed, "POST", "/v1/runs", "acme", json={**OTHER_SPEC, "id": "order-42"})
    assert (again.status_code, again.json()["id"]) == (200, mine)
    # Only a tenant's own id can conflict.
    own = call(keyed, "POST", "/v1/runs", "acme", json={**SPEC, "id": "order-42"})
    assert own.status_code == 409, own.text

    # Another tenant's run ids, known or guessed, tell globex nothing: GET is a 404 and a
    # POST naming the id is the same answer whether or not the run exists.
    generated = created(call(keyed, "POST", "/v1/runs", "acme", json=SPEC))
    for taken in (mine, generated):
        assert call(keyed, "GET", f"/v1/runs/{taken}", "globex").status_code == 404
    own_of_that_id = call(keyed, "POST", "/v1/runs", "globex", json={**SPEC, "id": generated})
    assert own_of_that_id.status_code == 201, own_of_that_id.text
    assert own_of_that_id.json()["id"] != generated
    probes = [
        call(keyed, "POST", "/v1/runs", "globex", json={**SPEC, "id": probe})
        for probe in (mine, mine[:-2] + "43")  # acme's id, and one acme never used
    ]
    assert [p.status_code for p in probes] == [422, 422]
    assert probes[0].json() == probes[1].json()  # word for word: existence shows nowhere
    assert call(keyed, "GET", f"/v1/runs/{mine}", "acme").json()["status"] in (
        "running",
        "succeeded",
    )


def test_idempotency_keys_are_the_tenants_own(keyed: ServeProcess) -> None:
    key = {"Idempotency-Key": "invoice-7"}
    theirs = created(call(keyed, "POST", "/v1/runs", "globex", json=SPEC, headers=key))
    mine = created(call(keyed, "POST", "/v1/runs", "acme", json=OTHER_SPEC, headers=key))
    assert mine != theirs
    again = call(keyed, "POST", "/v1/runs", "acme", json=OTHER_SPEC, headers=key)
    assert (again.status_code, again.json()["id"]) == (200, mine)


def test_batch_line_run_ids_cannot_be_taken_first(keyed: ServeProcess) -> None:
    # The ids a batch's lines used to get, `TENANT.BATCH.LINE.ATTEMPT`, squatted first.
    for squat in ("acme.nightly.1.1", "nightly.1.1", "acme.nightly.2.1"):
        created(call(keyed, "POST", "/v1/runs", "globex", json={**SPEC, "id": squat}))
    body = "\n".join(json.dumps({"custom_id": f"q{i}", "spec": SPEC}) for i in (1, 2))
    opened = call(keyed, "POST", "/v1/batches?id=nightly", "acme", content=body)
    assert opened.status_code == 201, opened.text

    def done() -> dict[str, Any] | None:
        info: dict[str, Any] = call(keyed, "GET", "/v1/batches/nightly", "acme").json()
        return info if info["status"] == "done" else None

    info = eventually(done, "acme's batch to end", 60)
    assert info is not None
    assert info["counts"]["succeeded"] == 2, info
    rows = [
        json.loads(line)
        for line in call(keyed, "GET", "/v1/batches/nightly/results", "acme").text.splitlines()
    ]
    run_ids = [r["run_id"] for r in rows]
    # In acme's namespace, behind a nonce drawn when the batch opened.
    assert all(r.startswith("n") and ".nightly." in r for r in run_ids), run_ids
    assert not any(r.endswith(("nightly.1.1", "nightly.2.1")) for r in run_ids)
    for run_id in run_ids:
        taken = call(keyed, "POST", "/v1/runs", "globex", json={**SPEC, "id": run_id})
        assert taken.status_code == 422, taken.text


async def test_the_python_api_names_runs_in_the_tenants_namespace(redis_url: str) -> None:
    async with Client(redis_url) as client:
        default = await client.runs.submit({**SPEC, "id": "job-1"})
        acme = await client.runs.submit({**SPEC, "id": "job-1"}, tenant="acme")
        globex = await client.runs.submit({**OTHER_SPEC, "id": "job-1"}, tenant="globex")
        assert default == "job-1"  # the default tenant's ids are as given
        assert len({default, acme, globex}) == 3
        assert [(await client.runs.status(r)).tenant for r in (default, acme, globex)] == [
            "default",
            "acme",
            "globex",
        ]
        assert await client.runs.submit({**SPEC, "id": "job-1"}, tenant="acme") == acme
        # Nobody, the default tenant included, names a run in a tenant's namespace.
        with pytest.raises(ValidationError, match="tenants' namespaces"):
            await client.runs.submit({**SPEC, "id": globex})
