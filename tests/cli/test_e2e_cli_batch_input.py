"""`agentq batch submit` refuses a faulty input file with one line naming what is wrong,
before it reports anything stored: a repeated custom_id, a file without lines, a
misspelled field. Real CLI processes against a real redis-server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from tests.support.infra import run_cli

pytestmark = pytest.mark.e2e

TEMPLATE = {"model": {"provider": "scripted", "script": [{"text": "ok"}]}}


def submit(tmp_path: Path, redis_url: str, rows: list[dict[str, Any]]) -> tuple[int, str]:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    template = tmp_path / "template.json"
    template.write_text(json.dumps(TEMPLATE))
    done = run_cli(
        "batch", "submit", str(path), "--spec", str(template), "--id", "b1", redis_url=redis_url
    )
    return done.returncode, done.stderr


def nothing_stored(redis_url: str) -> bool:
    return not cast(list[bytes], redis.Redis.from_url(redis_url).keys("*b1*"))


def test_a_repeated_custom_id_is_refused_before_anything_is_stored(
    tmp_path: Path, redis_url: str
) -> None:
    rows = [{"custom_id": "a", "prompt": "x"}, {"custom_id": "a", "prompt": "y"}]
    code, err = submit(tmp_path, redis_url, rows)
    assert code == 2, err
    assert err.strip() == "agentq: duplicate custom_id: line 2 repeats line 1 ('a')"
    assert nothing_stored(redis_url)


def test_an_empty_file_is_refused(tmp_path: Path, redis_url: str) -> None:
    code, err = submit(tmp_path, redis_url, [])
    assert code == 2, err
    assert err.strip() == "agentq: the input has no lines: a batch needs at least one"
    assert nothing_stored(redis_url)


def test_a_misspelled_field_is_named_with_its_likely_spelling(
    tmp_path: Path, redis_url: str
) -> None:
    code, err = submit(tmp_path, redis_url, [{"custom_id": "a", "promt": "hi"}])
    assert code == 2, err
    assert err.strip() == "agentq: line 1: unknown field 'promt' (did you mean 'prompt'?)"
    assert nothing_stored(redis_url)
