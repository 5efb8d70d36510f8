"""Where a traced step's tracing CPU goes, measured inside a real worker.

    python bench/tracing_in_situ.py [--runs 30] [--steps 100] [--quick]

A worker's tracing calls run between the rest of a job's work, with cold caches: in
place they cost about three times what they cost in a loop, so a micro-benchmark of
them misleads. This bench starts a redis-server and one `WorkerRuntime` process per
mode ("none": no tracer provider; "agentq": the SDK's provider and exporter, as
`tracing_bench.py` sets them up, posting to a sink that reads and discards), wraps
the tracing entry points a job calls (`process_span`, `span`, `annotate`,
`Hops.stamp` and `Hops.sent`, entering and leaving a span) with a thread-CPU clock,
runs N-step runs (scripted model, one no-op tool call per step) and prints the CPU
each entry point took per step, in the worker's event-loop thread, and the CPU per
step of that thread and of the worker's other threads (the span exporter's).

The clock itself costs about a microsecond a call (sixteen calls a step): compare the
modes, not the totals. Never asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
for path in (_HERE, _HERE.parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import tracing_bench  # noqa: E402
from core_bench import _free_port, redis_server  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402

_ENTRY_POINTS = ("process_span", "span", "annotate")
_HOPS = ("stamp", "sent")
_CURRENT = ("__enter__", "__exit__")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _clocked(spent: collections.Counter[str], name: str, call: Callable[..., Any]) -> Any:
    clock = time.thread_time

    @functools.wraps(call)
    def clocked(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return call(*args, **kwargs)
        finally:
            spent[name] += clock() - started

    return clocked


def _clock_entry_points(spent: collections.Counter[str]) -> None:
    from agentq.orchestrator import tracing

    for name in _ENTRY_POINTS:
        setattr(tracing, name, _clocked(spent, name, getattr(tracing, name)))
    for name in _HOPS:
        setattr(tracing.Hops, name, _clocked(spent, name, getattr(tracing.Hops, name)))
    for name in _CURRENT:
        label = "span " + name.strip("_")
        setattr(tracing._Current, name, _clocked(spent, label, getattr(tracing._Current, name)))


def _threads_cpu_s(pid: int) -> dict[str, float]:
    """user + system CPU of the worker's event-loop thread (its main thread) and of its
    other threads (the span exporter's, the lease renewer's), from /proc."""
    spent: dict[str, float] = collections.defaultdict(float)
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as stat:
            raw = stat.read()
        fields = raw[raw.rindex(")") + 2 :].split()
        which = "event loop" if int(tid) == pid else "other threads"
        spent[which] += (int(fields[11]) + int(fields[12])) / _TICKS_PER_S
    return spent


def _worker_child(url: str, mode: str, endpoint: str, ready: Any, stop: Any, report: Any) -> None:
    spent: collections.Counter[str] = collections.Counter()
    _clock_entry_points(spent)
    asyncio.run(tracing_bench._worker_main(url, mode, endpoint, ready, stop, report))
    report.send(dict(spent))


async def measure(mode: str, runs: int, steps: int) -> tuple[dict[str, float], dict[str, float]]:
    ctx = mp.get_context("spawn")
    port = _free_port()
    sink = ctx.Process(target=tracing_bench._sink_child, args=(port,), daemon=True)
    sink.start()
    try:
        with redis_server() as url:
            ready, stop = ctx.Event(), ctx.Event()
            conn, child = ctx.Pipe()
            endpoint = f"http://127.0.0.1:{port}/v1/traces"
            worker = ctx.Process(
                target=_worker_child, args=(url, mode, endpoint, ready, stop, child), daemon=True
            )
            worker.start()
            if not ready.wait(60):
                raise RuntimeError("the worker did not start")
            assert worker.pid is not None
            client = Client(url)
            try:
                await tracing_bench._step_ms(client, 5)  # warm up
                conn.send("cpu")
                conn.recv()
                before = _threads_cpu_s(worker.pid)
                for _ in range(runs):
                    await tracing_bench._step_ms(client, steps)
                conn.send("cpu")  # flushes the exporter first
                conn.recv()
                after = _threads_cpu_s(worker.pid)
            finally:
                await client.aclose()
            conn.send("stop")
            spent: dict[str, float] = conn.recv()
            worker.join(15)
    finally:
        sink.terminate()
    total = runs * steps
    # The warm-up's calls are in `spent` too: a few steps against thousands.
    per_call = {name: s / total for name, s in spent.items()}
    threads = {name: (after[name] - before.get(name, 0.0)) / total for name in after}
    return per_call, threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="2 runs of 10 steps")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.steps = 2, 10
    results = {
        mode: asyncio.run(measure(mode, args.runs, args.steps)) for mode in ("none", "agentq")
    }
    names = sorted({n for calls, _ in results.values() for n in calls})
    print(f"{args.runs} runs x {args.steps} steps per mode; load average {os.getloadavg()[0]:.2f}")
    print(f"{'thread CPU per step (us)':<26}{'none':>10}{'agentq':>10}{'added':>10}")
    for name in [*names, "all entry points"]:
        if name == "all entry points":
            none, agentq = (sum(results[m][0].values()) * 1e6 for m in ("none", "agentq"))
        else:
            none, agentq = (results[m][0].get(name, 0.0) * 1e6 for m in ("none", "agentq"))
        print(f"{name:<26}{none:>10.1f}{agentq:>10.1f}{agentq - none:>10.1f}")
    for thread in sorted({t for _, threads in results.values() for t in threads}):
        none, agentq = (results[m][1].get(thread, 0.0) * 1e6 for m in ("none", "agentq"))
        print(f"{'thread ' + thread:<26}{none:>10.1f}{agentq:>10.1f}{agentq - none:>10.1f}")


if __name__ == "__main__":
    main()
