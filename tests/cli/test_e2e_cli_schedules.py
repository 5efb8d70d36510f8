"""`agentq schedule` against a real redis-server: what a user types, and the one-line
refusals with exit 2 (no worker is needed: nothing here waits for a tick)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.infra import run_cli
from tests.support.specs import scripted

pytestmark = pytest.mark.e2e


def test_schedule_commands(redis_url: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(scripted({"text": "x"})))

    def cli(*args: str) -> tuple[int, str, str]:
        done = run_cli("schedule", *args, redis_url=redis_url)
        return done.returncode, done.stdout, done.stderr

    code, out, err = cli(
        "create",
        "daily",
        "--cron",
        "0 9 * * MON-FRI",
        "--spec",
        str(spec),
        "--tz",
        "Europe/Lisbon",
        "--tenant",
        "acme",
        "--json",
    )
    assert code == 0, err
    created = json.loads(out)
    assert (created["name"], created["tenant"], created["tz"]) == ("daily", "acme", "Europe/Lisbon")
    assert created["next_tick_at"] is not None
    code, out, _ = cli("list", "--tenant", "acme")
    assert code == 0
    assert out.startswith("daily  '0 9 * * MON-FRI' Europe/Lisbon  next ")
    assert cli("list")[1] == ""  # the default tenant has none
    assert "paused" in cli("pause", "daily", "--tenant", "acme")[1]
    assert "next " in cli("resume", "daily", "--tenant", "acme")[1]
    assert cli("runs", "daily", "--tenant", "acme")[:2] == (0, "")
    assert cli("delete", "daily", "--tenant", "acme")[:2] == (0, "deleted daily\n")

    for args, says in [
        (("runs", "daily", "--tenant", "acme"), "no schedule named 'daily'"),
        (("pause", "nope"), "no schedule named 'nope'"),
        (("create", "x", "--cron", "0 9 * *", "--spec", str(spec)), "invalid cron"),
        (("create", "x", "--cron", "0 9 * * *", "--spec", str(spec), "--tz", "X/Y"), "time zone"),
        (
            ("create", "x", "--cron", "0 9 * * *", "--spec", str(tmp_path / "none.json")),
            "cannot read",
        ),
    ]:
        code, _, err = cli(*args)
        assert code == 2, (args, err)
        assert err.count("\n") == 1, err
        assert says in err
