"""`agentq submit --tenant/--priority` (core/fairness.py): a priority that is not one is
refused before anything is created, naming the field, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from tests.support.infra import run_cli
from tests.support.specs import scripted

pytestmark = pytest.mark.integration


def test_the_cli_refuses_a_bad_priority_naming_it(redis_url: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(scripted({"text": "done"})))

    done = run_cli(
        "submit", str(spec), "--tenant", "acme", "--priority", "urgent", redis_url=redis_url
    )

    assert done.returncode == 2, done.stderr
    assert "priority" in done.stderr
    assert redis.Redis.from_url(redis_url).keys("aq:run:*") == []
