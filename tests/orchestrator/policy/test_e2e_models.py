"""`--models FILE`: the deployment's model endpoints, through `agentq run` and `submit`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.fake_openai import FakeOpenAI, Turn
from tests.support.infra import WorkerProcess, run_cli, wait_ready
from tests.support.models import write_models_file

pytestmark = pytest.mark.e2e

KEY = "sk-local-endpoint-0123456789"


def write_spec(tmp_path: Path, model: str) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"model": model, "prompt": "hi"}))
    return str(path)


def test_run_through_an_endpoint_of_the_models_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_LLM_KEY", KEY)
    with FakeOpenAI([Turn(text="hello from local")]) as server:
        models = write_models_file(
            tmp_path / "models.json",
            local={
                "provider": "openai",
                "base_url": server.base_url,
                "api_key_env": "LOCAL_LLM_KEY",
                "models": ["llama"],
            },
        )
        done = run_cli("run", write_spec(tmp_path, "local:llama"), "--models", models, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["text"] == "hello from local"
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
        assert server.requests[0].body["model"] == "llama"
        refused = run_cli("run", write_spec(tmp_path, "local:gpt-4o"), "--models", models)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "agentq: model.name: the endpoint 'local' does not serve 'gpt-4o' (it serves: llama)"
    )
    assert len(server.requests) == 1


def test_a_bad_models_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "models.json"
    bad.write_text('{"endpoints": {"x": {"provider": "openai", "base_url": "file:///etc"}}}')
    done = run_cli("run", write_spec(tmp_path, "x:m"), "--models", str(bad))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"agentq: models file {bad}: endpoints.x.base_url:")


def test_submit_refuses_an_endpoint_no_live_worker_knows(tmp_path: Path, redis_url: str) -> None:
    local = {"provider": "openai", "base_url": "http://10.0.0.5:8000/v1", "api_key_env": "K"}
    workers_file = write_models_file(tmp_path / "workers.json", local=local)
    # The submitter's models file has one endpoint more than the workers'.
    mine = write_models_file(tmp_path / "mine.json", local=local, other=local)
    worker = WorkerProcess(redis_url, "--queue", "model", env={"AGENTQ_MODELS": workers_file})
    try:
        wait_ready(worker)
        known = run_cli(
            "submit", write_spec(tmp_path, "local:m"), "--models", mine, redis_url=redis_url
        )
        unknown = run_cli(
            "submit", write_spec(tmp_path, "other:m"), "--models", mine, redis_url=redis_url
        )
    finally:
        worker.stop()
    assert known.returncode == 0, known.stderr
    assert unknown.returncode == 2, unknown.stderr
    assert unknown.stderr.startswith(
        "agentq: model.endpoint: no live worker knows the endpoint 'other'"
    )
