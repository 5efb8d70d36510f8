"""Sandbox call latency against raw Docker, measured in the same run.

    python bench/sandbox_bench.py [--iterations N]

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

from sandbox.config import SandboxConfig
from sandbox.docker_backend import DockerBackend
from sandbox.images import build_images, image_name
from sandbox.manager import SandboxManager
from sandbox.models import ExecRequest

IMAGE = image_name("python")
PASS = ["python3", "-c", "pass"]


def timed(action: Callable[[], object], iterations: int) -> list[float]:
    action()  # warm caches; not counted
    samples = []
    for _ in range(iterations):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


async def timed_async(
    action: Callable[[], Awaitable[object]],
    iterations: int,
    between: Callable[[], Awaitable[object]],
) -> list[float]:
    await between()
    await action()  # warm caches; not counted
    samples = []
    for _ in range(iterations):
        await between()
        started = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - started)
    return samples


def cli(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, capture_output=True)


def raw_baselines(iterations: int) -> dict[str, list[float]]:
    client = docker.from_env()
    results = {
        "raw run (CLI)": timed(
            lambda: cli("run", "--rm", "--network", "none", IMAGE, *PASS), iterations
        ),
        "raw run (SDK)": timed(
            lambda: client.containers.run(IMAGE, PASS, network_mode="none", remove=True),
            iterations,
        ),
    }
    container = client.containers.run(
        IMAGE, ["sleep", "infinity"], network_mode="none", detach=True, remove=True
    )
    try:
        results["raw exec (CLI)"] = timed(lambda: cli("exec", container.id, *PASS), iterations)
        results["raw exec (SDK)"] = timed(lambda: container.exec_run(PASS), iterations)
    finally:
        container.remove(force=True)
    return results


async def manager_latency(iterations: int) -> dict[str, list[float]]:
    request = ExecRequest(language="python", code="pass")
    results: dict[str, list[float]] = {}
    warm_config = SandboxConfig(worker_id="bench-warm", pool_size={"python": 1})
    async with SandboxManager(DockerBackend(), warm_config) as manager:

        async def refilled() -> None:
            await manager.close_session("none")  # drains pending removals
            await manager.wait_pools_ready(timeout_s=60)

        async def call() -> None:
            result = await manager.execute(request)
            assert result.ok, result

        results["agentq warm (pool)"] = await timed_async(call, iterations, refilled)
        assert manager.stats.cold_starts == 0, "a warm call fell back to a cold start"
    cold_config = SandboxConfig(worker_id="bench-cold", pool_size={})
    async with SandboxManager(DockerBackend(), cold_config) as cold:

        async def drained() -> None:
            await cold.close_session("none")

        async def cold_call() -> None:
            result = await cold.execute(request)
            assert result.ok, result

        results["agentq cold (no pool)"] = await timed_async(cold_call, iterations, drained)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    build_images()
    samples = raw_baselines(args.iterations)
    samples.update(asyncio.run(manager_latency(args.iterations)))
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
