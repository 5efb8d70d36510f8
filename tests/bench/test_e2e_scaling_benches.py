"""Issue 31's capacity benches as a user runs them: `trips_by_command.py --workers 1,2`
closes with the scaling table (agentq and raw arq on as many processes, each count its
own row), and `scale_model.py --run-cpu-ms MS` with the projection per primary and per
Cluster. No timed figure is read: only that the rows are there, and the projection's
arithmetic from the figure it was given."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.infra import REPO, missing

pytestmark = pytest.mark.e2e


def bench(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("redis-server") is None:
        missing("redis-server", "install it with `apt-get install -y redis-server` (.ci/run does)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / program), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_scaling_table_has_a_row_per_count_of_processes() -> None:
    done = bench("trips_by_command.py", "--quick", "--workers", "1,2")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    table = done.stdout.split("worker processes: runs/s and worker CPU per run", 1)[1]
    # The table ends at its blank line; the bench goes on with other tables.
    rows = [line.split() for line in table.split("\n\n", 1)[0].splitlines()[2:]]
    assert [row[0] for row in rows] == ["1", "2"]
    # procs, agentq runs/s, x, CPU/run, x, arq runs/s, x, CPU/run, vs arq
    assert all(len(row) == 9 for row in rows), rows
    assert "sleeps per job" in done.stdout


def test_a_bad_count_of_processes_is_one_line_and_exit_2() -> None:
    done = bench("trips_by_command.py", "--workers", "one,two")
    assert done.returncode == 2
    assert "--workers: counts of processes" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_scale_model_projects_runs_per_primary_from_the_run_cost() -> None:
    done = bench("scale_model.py", "--quick", "--run-cpu-ms", "1.25")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "projection (not a measurement)" in done.stdout
    projected = {
        int(m["primaries"]): int(m["runs"])
        for m in re.finditer(
            r"^\s+(?P<primaries>\d+) primaries:\s+(?P<runs>\d+) runs/s$", done.stdout, re.M
        )
    }
    # --quick measures no Cluster: every primary carries 1 / 1.25 ms
    assert projected == {1: 800, 3: 2400, 6: 4800, 12: 9600}
