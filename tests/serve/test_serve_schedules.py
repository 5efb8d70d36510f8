"""The schedules API over real HTTP, with tenant keys: a schedule is its tenant's, and
another tenant's key finds nothing under its name (404), whatever it tries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme-secret", "globex": "key-globex-secret", "reader": "key-acme-reader"}
SPEC = scripted({"text": "tick"})


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(
        [
            f"{hash_key(KEYS['acme'])} acme",
            f"{hash_key(KEYS['globex'])} globex",
            f"{hash_key(KEYS['reader'])} acme runs:read",
        ]
    )
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": lines})
    yield process
    process.stop()


def call(server: ServeProcess, method: str, path: str, who: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)


def test_a_schedule_fires_and_is_its_tenants_only(keyed: ServeProcess) -> None:
    body = {"name": "pulse", "cron": "* * * * * *", "spec": SPEC, "overlap": "allow"}
    created = call(keyed, "POST", "/v1/schedules", "acme", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["tenant"] == "acme"
    assert call(keyed, "POST", "/v1/schedules", "acme", json=body).status_code == 200
    records = eventually(
        lambda: call(keyed, "GET", "/v1/schedules/pulse/runs", "acme").json(),
        "two ticks to fire",
        until=lambda found: len(found) >= 2,
    )
    run_id = records[0]["run_id"]
    # The tick's run is the tenant's run: its own key reads it.
    assert call(keyed, "GET", f"/v1/runs/{run_id}", "acme").status_code == 200

    # Another tenant: the name is free in its namespace, and acme's is out of reach.
    for method, path in [
        ("GET", "/v1/schedules/pulse"),
        ("GET", "/v1/schedules/pulse/runs"),
        ("POST", "/v1/schedules/pulse/pause"),
        ("POST", "/v1/schedules/pulse/resume"),
        ("DELETE", "/v1/schedules/pulse"),
    ]:
        refused = call(keyed, method, path, "globex")
        assert refused.status_code == 404, (method, path, refused.text)
        assert refused.json()["error"]["type"] == "not_found"
    assert call(keyed, "GET", "/v1/schedules", "globex").json() == []
    assert call(keyed, "GET", f"/v1/runs/{run_id}", "globex").status_code == 404
    # A read-only key reads, and changes nothing.
    assert call(keyed, "GET", "/v1/schedules/pulse", "reader").status_code == 200
    assert call(keyed, "POST", "/v1/schedules/pulse/pause", "reader").status_code == 403

    paused = call(keyed, "POST", "/v1/schedules/pulse/pause", "acme").json()
    assert (paused["paused"], paused["next_tick_at"]) == (True, None)
    assert [s["name"] for s in call(keyed, "GET", "/v1/schedules", "acme").json()] == ["pulse"]
    assert call(keyed, "DELETE", "/v1/schedules/pulse", "acme").status_code == 204
    assert call(keyed, "GET", "/v1/schedules/pulse", "acme").status_code == 404


def test_bad_schedules_are_refused_in_one_line(keyed: ServeProcess) -> None:
    for body, field_says in [
        ({"name": "x", "cron": "0 9 * *", "spec": SPEC}, "invalid cron"),
        ({"name": "x", "cron": "0 9 * * *", "spec": SPEC, "tz": "Mars/X"}, "unknown time zone"),
        ({"name": "a b", "cron": "0 9 * * *", "spec": SPEC}, "invalid schedule name"),
        ({"name": "x", "cron": "0 9 * * *", "spec": scripted(tools=["nope"])}, "nope"),
    ]:
        refused = call(keyed, "POST", "/v1/schedules", "acme", json=body)
        assert refused.status_code == 422, refused.text
        assert field_says in refused.json()["error"]["message"]
    call(
        keyed,
        "POST",
        "/v1/schedules",
        "acme",
        json={"name": "x", "cron": "0 9 * * *", "spec": SPEC},
    )
    other = {"name": "x", "cron": "0 10 * * *", "spec": SPEC}
    assert call(keyed, "POST", "/v1/schedules", "acme", json=other).status_code == 409
