"""`agentq submit --concurrency-key K --concurrency-max N` (orchestrator/concurrency/): the
run counts under the key, `agentq status` shows it; a bad max, a key that is not one, or
one flag without the other is one line and exit 2, nothing created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import placement
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.specs import scripted

pytestmark = pytest.mark.integration


@pytest.fixture
def spec(tmp_path: Path) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(scripted({"text": "done"})))
    return str(path)


def test_submit_names_the_key_and_status_shows_it(
    redis_url: str, workers: list[WorkerProcess], spec: str
) -> None:
    workers.append(WorkerProcess(redis_url, "--tools", TOOLS))
    wait_ready(*workers)
    flags = ("--tenant", "acme", "--concurrency-key", "user-42", "--concurrency-max", "2")
    done = run_cli("submit", spec, *flags, redis_url=redis_url)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert run_id.startswith(placement("acme", "user-42"))
    assert run_cli("wait", run_id, "--timeout", "60", redis_url=redis_url).returncode == 0

    status = run_cli("status", run_id, redis_url=redis_url)
    assert "concurrency key user-42: at most 2 runs at once" in status.stdout, status.stdout
    as_json = run_cli("status", run_id, "--json", redis_url=redis_url)
    # An ended run no longer counts under its key: its key and max, no load.
    ended = {"key": "user-42", "max": 2, "in_use": None, "held": None, "state": None}
    assert json.loads(as_json.stdout)["concurrency"] == ended


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (("--concurrency-key", "k", "--concurrency-max", "0"), "concurrency.max: Input should"),
        (("--concurrency-key", "a b", "--concurrency-max", "2"), "concurrency.key: Value error"),
        (("--concurrency-key", "k"), "--concurrency-key and --concurrency-max go together"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(
    redis_url: str, spec: str, flags: tuple[str, ...], line: str
) -> None:
    done = run_cli("submit", spec, *flags, redis_url=redis_url)

    assert done.returncode == 2, done.stderr
    assert line in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert redis.Redis.from_url(redis_url).keys(keys.RUN_PREFIX + "*") == []
