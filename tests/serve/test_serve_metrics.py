"""`agentq serve`'s `/metrics`, scraped over real HTTP after real requests: a real
redis-server, a real `agentq worker` process and a real `agentq serve` process."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentq.serve.auth import hash_key
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.serve import ServeProcess
from tests.support.specs import parked_spec, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme", "globex": "key-globex", "ops": "key-ops"}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def fleet(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS)
    wait_ready(process)
    yield process
    process.stop()


@pytest.fixture
def api(redis_url: str, fleet: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(
        [
            f"{hash_key(KEYS['acme'])} acme",
            f"{hash_key(KEYS['globex'])} globex",
            f"{hash_key(KEYS['ops'])} ops metrics",
        ]
    )
    process = ServeProcess(
        redis_url,
        env={
            "AGENTQ_API_KEYS": lines,
            "AGENTQ_SERVE_HEARTBEAT_S": "1",
            "AGENTQ_SUBMITS_PER_MINUTE": "3",
        },
    )
    yield process
    process.stop()


def _http(api: ServeProcess, who: str) -> httpx.Client:
    return httpx.Client(
        base_url=api.url, headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=60
    )


def scrape(api: ServeProcess) -> Samples:
    with _http(api, "ops") as http:
        response = http.get("/metrics")
    assert response.status_code == 200, response.text
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over the samples whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_serve_counts_submits_streams_latency_and_the_runs_it_ended(api: ServeProcess) -> None:
    done = scripted({"text": "hi"})
    with _http(api, "acme") as acme, _http(api, "globex") as globex:
        assert acme.post("/v1/runs", json=done).status_code == 201
        assert acme.post("/v1/runs", json={"prompt": "x", "nope": 1}).status_code == 422
        parked = acme.post("/v1/runs", json=parked_spec())
        assert parked.status_code == 201, parked.text
        run_id = parked.json()["id"]
        assert globex.post("/v1/runs", json=done).status_code == 201
        assert acme.post("/v1/runs", json=done).status_code == 201  # the third this minute
        assert acme.post("/v1/runs", json=done).status_code == 429
        with acme.stream("GET", f"/v1/runs/{run_id}/events") as stream:
            lines = stream.iter_lines()
            next(lines)  # the stream has started
            streaming = scrape(api)
            cancelled = acme.post(f"/v1/runs/{run_id}/cancel", json={})
            assert cancelled.status_code == 200, cancelled.text
            for _ in lines:
                pass  # the run ended: its stream ends
    events = {"route": "/v1/runs/{run_id}/events"}
    assert value(streaming, "agentq_sse_streams_open", **events) == 1

    after = eventually(
        lambda: scrape(api),
        "the ended stream to close",
        until=lambda s: value(s, "agentq_sse_streams_open", **events) == 0,
    )
    submits = "agentq_submits_total"
    assert value(after, submits, door="runs", tenant="acme", outcome="accepted") == 3
    assert value(after, submits, door="runs", tenant="acme", outcome="rate_limited") == 1
    assert value(after, submits, door="runs", tenant="globex", outcome="accepted") == 1
    # Refused before its key was read (the body did not parse): no tenant.
    assert value(after, submits, door="runs", tenant="", outcome="invalid") == 1
    runs = {"route": "/v1/runs", "method": "POST"}
    assert value(after, "agentq_http_request_duration_seconds_count", status="201", **runs) == 4
    assert value(after, "agentq_http_request_duration_seconds_count", **events) == 1
    ended = {"tenant": "acme", "status": "cancelled"}
    assert value(after, "agentq_runs_ended_total", **ended) == 1


def test_metrics_need_a_key_that_names_the_scope(api: ServeProcess) -> None:
    with _http(api, "acme") as http:
        assert http.get("/metrics").status_code == 403
    assert httpx.get(f"{api.url}/metrics", timeout=30).status_code == 401
