"""Every program in bench/ runs clean: `--help` answers, and `--quick` (a smoke run of a
few samples) exits 0 without a traceback. Nothing here reads a figure or a time: the
benches' numbers are for people, their ratios against baselines of the same run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from tests.support.infra import REPO, missing

pytestmark = pytest.mark.benches

BENCH = REPO / "bench"
# A program is a module with a main guard; the others (verdicts.py) are its helpers.
PROGRAMS = sorted(p for p in BENCH.glob("*.py") if 'if __name__ == "__main__":' in p.read_text())
# What a program needs beyond a redis-server, and how to get it.
NEEDS_DOCKER = {"sandbox_bench.py"}
NEEDS_CLUSTER = {"cluster_bench.py", "cluster_acks_bench.py"}
# A hung bench fails the test instead of holding the suite; no figure is read from it.
HANG_S = 600


def _run(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(program), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )


def _needs(program: Path) -> None:
    if shutil.which("redis-server") is None:
        missing("redis-server", "install it with `apt-get install -y redis-server` (.ci/run does)")
    if program.name in NEEDS_CLUSTER and shutil.which("redis-cli") is None:
        missing("redis-cli", "install it with `apt-get install -y redis-tools` (.ci/run does)")
    if program.name in NEEDS_DOCKER:
        try:
            docker.from_env().ping()
        except Exception as exc:
            missing(f"Docker ({exc})", "start dockerd (`.ci/sandbox-setup`)")


def test_the_programs_are_found() -> None:
    assert {"core_bench.py", "hop_budget.py", "trips_by_command.py"} <= {p.name for p in PROGRAMS}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_help(program: Path) -> None:
    done = _run(program, "--help")
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_quick_runs_clean(program: Path) -> None:
    _needs(program)
    done = _run(program, "--quick")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-4000:]
