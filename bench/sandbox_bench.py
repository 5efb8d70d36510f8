"""Sandbox call latency against raw Docker, measured in the same run.

    python bench/sandbox_bench.py [--iterations N] [--quick]

Baselines (the same image, `python3 -c pass`):
- raw run:  `docker run --rm --network none IMG python3 -c pass`, via the CLI
            and via the SDK (`containers.run(..., remove=True)`); both include
            the container's removal, as `--rm` does.
- raw exec: `docker exec C python3 -c pass` into a running container, via the
            CLI and via the SDK (`Container.exec_run`).

agentq (`SandboxManager.execute` of `pass`, default hardening and limits):
- warm: a pooled container (the pool is refilled between calls, untimed);
- cold: no pool: create, attach, start, driver ready, run. The container is
  removed after the result is returned (pending removals are drained between
  calls, untimed), so removal is not part of the call's latency.

The six series are measured round-robin (one of each per round), so that
load from other processes on the machine hits them alike.

Ratios printed: warm / raw exec (goal <= 1.3) and cold / raw run (goal <= 1.2),
each against the SDK baseline (the manager uses the SDK) and the CLI one.
Absolute times are noisy on shared machines: compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docker

from agentq.sandbox.config import SandboxConfig
from agentq.sandbox.docker_backend import DockerBackend
from agentq.sandbox.images import build_images, image_name
from agentq.sandbox.manager import SandboxManager
from agentq.sandbox.models import ExecRequest

IMAGE = image_name("python")
PASS = ["python3", "-c", "pass"]


def cli(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, capture_output=True)


async def measure(iterations: int) -> dict[str, list[float]]:
    """Round-robin over the six series, so load drift on the machine hits all alike."""
    client = docker.from_env()
    request = ExecRequest(language="python", code="pass")
    target = client.containers.run(
        IMAGE, ["sleep", "infinity"], network_mode="none", detach=True, remove=True
    )
    warm = SandboxManager(
        DockerBackend(), SandboxConfig(worker_id="bench-warm", pool_size={"python": 1})
    )
    cold = SandboxManager(DockerBackend(), SandboxConfig(worker_id="bench-cold", pool_size={}))

    async def blocking(action: Callable[[], object]) -> None:
        await asyncio.to_thread(action)

    async def warm_call() -> None:
        result = await warm.execute(request)
        assert result.ok, result

    async def cold_call() -> None:
        result = await cold.execute(request)
        assert result.ok, result

    async def settle() -> None:
        # Untimed: pending removals finish, the pool is full again.
        await warm.close_session("none")
        await cold.close_session("none")
        await warm.wait_pools_ready(timeout_s=60)

    series: dict[str, Callable[[], Awaitable[None]]] = {
        "raw run (CLI)": lambda: blocking(
            lambda: cli("run", "--rm", "--network", "none", IMAGE, *PASS)
        ),
        "raw run (SDK)": lambda: blocking(
            lambda: client.containers.run(IMAGE, PASS, network_mode="none", remove=True)
        ),
        "raw exec (CLI)": lambda: blocking(lambda: cli("exec", target.id, *PASS)),
        "raw exec (SDK)": lambda: blocking(lambda: target.exec_run(PASS)),
        "agentq warm (pool)": warm_call,
        "agentq cold (no pool)": cold_call,
    }
    samples: dict[str, list[float]] = {name: [] for name in series}
    try:
        await warm.start()
        await cold.start()
        for round_number in range(iterations + 1):
            for name, action in series.items():
                await settle()
                started = time.perf_counter()
                await action()
                if round_number:  # round 0 warms caches
                    samples[name].append(time.perf_counter() - started)
        assert warm.stats.cold_starts == 0, "a warm call fell back to a cold start"
    finally:
        await warm.aclose()
        await cold.aclose()
        target.remove(force=True)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="2 iterations")
    args = parser.parse_args()
    if args.quick:
        args.iterations = 2
    build_images()
    samples = asyncio.run(measure(args.iterations))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"sandbox latency, median of {args.iterations} (image {IMAGE})")
    for name, value in medians.items():
        print(f"  {name:<24} {value * 1000:8.1f} ms")
    warm, cold = medians["agentq warm (pool)"], medians["agentq cold (no pool)"]
    print("ratios (lower is better)")
    for base in ("SDK", "CLI"):
        exec_ratio = warm / medians[f"raw exec ({base})"]
        run_ratio = cold / medians[f"raw run ({base})"]
        print(f"  warm / raw exec ({base}): {exec_ratio:5.2f}  (goal <= 1.3)")
        print(f"  cold / raw run  ({base}): {run_ratio:5.2f}  (goal <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
