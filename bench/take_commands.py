"""Where a claim's (TAKE's) Redis time goes: its inner commands and its µs per call, by
path, over step runs on a real worker.

    python bench/take_commands.py [--runs N] [--steps N] [--quick]

Starts its own redis-server and one agentq worker process (as `trips_by_command.py`
does), then runs N runs of S steps (one no-op call per step) one after another, twice:

1. under MONITOR, which lists every command a script runs after the script's own line:
   each TAKE call's inner commands, grouped by path. A call with slots to claim is a
   "claim" (behind a BLPOP, alone, or behind a job's end), one with none an "end" (the
   job's end riding its last transition while the claim loop waits on the wake-up
   list). It prints per path the calls per step, the inner commands per call, and the
   commonest sequences of commands;
2. under SLOWLOG (every command logged with its time; MONITOR off, since it slows each
   inner command): Redis's µs per TAKE call by path, median and mean, and per step.

Counts are exact; times are Redis's own (a shared machine adds noise: compare runs made
one after another).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import multiprocessing as mp
import statistics
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import core_bench  # noqa: E402
import hop_budget  # noqa: E402
import redis  # noqa: E402
import trips_by_command  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402
from agentq.workers.queue import claims  # noqa: E402

# An EVALSHA's words: the command, the sha, the key count, TAKE's 8 keys, then its ARGV;
# ARGV[3] (how many to claim) is the 14th.
_TAKE_KEYS = 8
_HOW_MANY = 3 + _TAKE_KEYS + 2


@dataclass
class Paths:
    """TAKE calls by path: each call's inner commands, and Redis's µs per call."""

    commands: dict[str, list[list[str]]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )
    usec: dict[str, list[int]] = field(default_factory=lambda: collections.defaultdict(list))


def _path(words: list[str]) -> str:
    return "claim" if len(words) > _HOW_MANY and words[_HOW_MANY] != "0" else "end"


def _words(command: Any) -> list[str]:
    text = command.decode() if isinstance(command, bytes) else str(command)
    return text.split()


class _Monitor:
    """MONITOR on its own connection, in a thread: each TAKE call with the inner commands
    that follow it (those of client type `lua`)."""

    def __init__(self, url: str, take_sha: str) -> None:
        # No socket timeout: redis-py drops a connection whose read timed out, and a
        # MONITOR dropped in a quiet moment loses the rest of the calls. The listener
        # ends on a marker command instead, which __exit__ sends.
        self._url = url
        self._client = redis.Redis.from_url(url)
        self._sha = take_sha
        self._marker = f"take-commands-monitor-end-{uuid.uuid4().hex}"
        self.calls: list[tuple[str, list[str]]] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)

    def __enter__(self) -> _Monitor:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *_: object) -> None:
        with redis.Redis.from_url(self._url) as marker:
            marker.echo(self._marker)
        self._thread.join(30)
        self._client.close()

    def _listen(self) -> None:
        current: list[str] | None = None
        with self._client.monitor() as monitor:
            self._ready.set()
            while True:
                entry = monitor.next_command()
                words = _words(entry["command"])
                if not words:
                    continue
                if self._marker in words:
                    return
                if entry.get("client_type") == "lua":
                    if current is not None:
                        current.append(words[0].upper())
                    continue
                current = None
                if words[0].upper() == "EVALSHA" and len(words) > 1 and words[1] == self._sha:
                    current = []
                    self.calls.append((_path(words), current))


async def _step_runs(client: Client, runs: int, steps: int) -> None:
    for _ in range(runs):  # one after another, as trips_by_command's step runs
        await hop_budget.wait_all(client, [await client.runs.submit(core_bench.step_spec(steps))])


async def _measure(url: str, runs: int, steps: int) -> Paths:
    take_sha = hashlib.sha1(claims.TAKE.encode()).hexdigest()
    paths = Paths()
    async with Client(url) as client:
        await _step_runs(client, 1, 2)  # warm: connections made, scripts loaded
        await asyncio.sleep(1.0)  # the idle worker's first polls settle
        with _Monitor(url, take_sha) as monitor:
            await _step_runs(client, runs, steps)
            await asyncio.sleep(0.3)  # the last lines arrive
        for path, commands in monitor.calls:
            paths.commands[path].append(commands)
        await client.redis.config_set("slowlog-max-len", 1_000_000)
        await client.redis.config_set("slowlog-log-slower-than", 0)
        await client.redis.slowlog_reset()
        await _step_runs(client, runs, steps)
        for entry in await client.redis.slowlog_get(-1):
            words = _words(entry["command"])
            if len(words) > 1 and words[0].upper() == "EVALSHA" and words[1] == take_sha:
                paths.usec[_path(words)].append(int(entry["duration"]))
        await client.redis.config_set("slowlog-log-slower-than", 10_000)
    return paths


def _run(runs: int, steps: int) -> Paths:
    ctx = mp.get_context("spawn")
    out = str(Path(tempfile.mkdtemp(prefix="agentq-take-")) / "counts.json")
    with core_bench.redis_server() as url:
        ready, reset, dump, stop = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Event()
        worker = ctx.Process(
            target=trips_by_command._worker,
            args=(url, ready, reset, dump, stop, out, False),
            daemon=True,
        )
        worker.start()
        try:
            if not ready.wait(30):
                raise RuntimeError("the worker did not start")
            reset.set()
            return asyncio.run(_measure(url, runs, steps))
        finally:
            dump.set()
            stop.set()
            worker.join(timeout=20)
            if worker.is_alive():
                worker.terminate()


def _report(paths: Paths, runs: int, steps: int) -> None:
    total = runs * steps
    print(f"TAKE over {runs} run(s) of {steps} steps (one no-op call a step), one worker")
    print("\ninner commands (MONITOR):")
    for path, calls in sorted(paths.commands.items()):
        inner = sum(len(c) for c in calls)
        print(
            f"  {path:6s} {len(calls) / total:5.2f} calls/step, {inner / max(1, len(calls)):5.2f}"
            f" commands/call, {inner / total:5.2f} commands/step"
        )
        shapes = collections.Counter(" ".join(c) for c in calls)
        for shape, n in shapes.most_common(3):
            print(f"    {n / len(calls):4.0%}  [{len(shape.split())}] {shape}")
    print("\nRedis µs per call (SLOWLOG):")
    for path, usec in sorted(paths.usec.items()):
        print(
            f"  {path:6s} median {statistics.median(usec):6.1f}  mean {statistics.mean(usec):6.1f}"
            f"  ({len(usec) / total:.2f} calls/step, {sum(usec) / total:6.1f} µs/step)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs one after another (3)")
    parser.add_argument("--steps", type=int, default=core_bench.RUN_STEPS, help="steps a run")
    parser.add_argument("--quick", action="store_true", help="a smoke run: one 5-step run")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.steps = 1, 5
    _report(_run(args.runs, args.steps), args.runs, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
